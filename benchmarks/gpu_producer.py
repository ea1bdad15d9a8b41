#!/usr/bin/env python3
"""The GPU producer at real scale (issue 9): no device cache, and out of the trainer's way.

On the GPU host (about 5 minutes on an H100; everything in one run):

  python3 benchmarks/gpu_producer.py --out OUT [--data DIR] [--workers 2] [--mps on]
      [--transcode-cache-mb 1024] [--nvjpeg-calls 1] [--nvjpeg-region on|off]
      [--server-batch 256] [--handoff] [--interference] [--paced]
      [--no-reference] [--repeat N] [--gpu-priority normal|high] [--in-process normal,high]
      [--trainer-sm-share P] [--server-sm-share P]   (with --mps on)

  1. dataset: tools/make_dataset.py (100 classes x 40 images, ~500x375; 5 %
     progressive, 5 % grayscale, 4:4:4 and 4:2:2 sampling: on an H100 about
     7-8 % of the files are refused by the nvJPEG hardware engine), or --data;
     read once so that the page cache holds it;
  2. the reference: nvJPEG hardware decode-only rate of the files it takes
     (benchmarks/gpu_pipeline_bench --modes decode --nvjpeg-input pinned: in
     page-locked memory, as the server passes them, no I/O), run
     before and after step 3; the higher of the two counts (the engine's rate
     moves between runs and hosts);
  3. one server (batchcast-server serve, --device cuda:0 --decode gpu, train
     224 float16, batch 256, window 8, --device-cache-mb 0: the cache is OFF,
     so every epoch costs what the first does) and one Loader reading as fast
     as it can: images/s, its ratio to the reference (goal >= 0.9), the
     server's CPU cores (/proc), the per-stage times of the stats
     (producer_stage_s, as shares of the wall time) and the consumer's wait_s;
  4. ResNet-18 (bs 128, bf16 autocast, channels_last, SGD) on synthetic GPU
     data, then the same fed by a Loader of that server: images/s and the
     ratio (goal >= 0.9; >= 0.95 under MPS: --mps on starts a private MPS
     daemon for the server and the trainer; the summary reports the server's
     own MPS probe); with --repeat N, the synthetic and the fed window
     alternate N times and the figure is the median of the N ratios (the
     trainer's own rate drifts by several per cent between windows);
  5. with --interference, the same trainer on synthetic data beside an nvJPEG
     decode-only process; with --handoff, fed by a --synthetic server (the
     hand-off alone, no decoding; --repeat pairs with synthetic windows, as
     in 4): where a fed trainer loses its time;
     with --paced, the same trainer on synthetic data beside an nvJPEG
     decode-only process and beside a FillBatch process (decode, fallbacks,
     kernel: the server's producer work without the hand-off), each paced
     at the rate the fed trainer reached (gpu_pipeline_bench --rate); each
     such process's own rate is reported too (did it keep its pace?); with
     --in-process too, the trainer on synthetic data while a thread of its
     process pulls from the in-process server at the fed rate
     (PacedPuller: the server's work in process, the trainer not waiting).
     BC_PACED_PREFIX (e.g. "nsys profile -o OUT/fill --trace cuda") is put
     before the paced FillBatch command: a trace of the server's GPU work;
     BC_SERVER_PREFIX likewise before every batchcast-server command (this
     program's and fed_coupling.py's), e.g. "env
     CUDA_INJECTION64_PATH=/tmp/libcupti_trace.so BC_CUPTI_DIR=OUT"
     (benchmarks/cupti_trace.cc: the GPU host has no Nsight Systems).

  6. with --in-process P[,P]: the same server run by batchcast.Server inside
     the trainer's process (one CUDA context: the GPU does not time-slice
     between the server's decode and the trainer), at each --gpu-priority P
     (Note [Server stream priority]): the Loader's rate (as in 3) and the
     fed trainer's pairs (as in 4); the server's CPU is that of its own
     threads (named bc-*). --gpu-priority sets the server process's of 3-4;
     --in-process-only skips 3-4.

--no-reference skips steps 2 and the Loader's rate of steps 3 and 6 (a
diagnosis run: the trainer's rates only).

Prints a summary and writes OUT/gpu_producer.json. Every figure says the
device cache is off.

CPU smoke run (seconds, no GPU, no torch; checks the plumbing and the stats):

  python3 benchmarks/gpu_producer.py --smoke --out /tmp/gp

The batchcast build is found from BATCHCAST_BUILD_DIR (or --build, else
build/ or build-gpu/).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from bench_files import serve_flags, warm_page_cache  # noqa: E402  (also used through this module)


def find_build(arg):
    for cand in [arg, os.environ.get("BATCHCAST_BUILD_DIR"), os.path.join(REPO, "build"),
                 os.path.join(REPO, "build-gpu")]:
        if cand and os.path.isfile(os.path.join(cand, "tools", "batchcast-server")):
            build = os.path.abspath(cand)
            sys.path.insert(0, os.path.join(build, "python"))
            return build
    sys.exit("no batchcast build found: set BATCHCAST_BUILD_DIR or --build")


def make_dataset(args, data):
    if os.path.isdir(data):
        return
    cmd = [sys.executable, os.path.join(REPO, "tools", "make_dataset.py"), data,
           "--classes", str(args.classes), "--per-class", str(args.per_class), "--seed", "1",
           "--quiet", "--workers", str(max(1, os.cpu_count() or 1))]
    subprocess.run(cmd, check=True, timeout=300)


def server_options(args, priority, synthetic=False):
    """The benchmark's server as batchcast.Server options (ServerProc passes
    them as serve flags, InProcServer as keywords): the image dataset on
    cuda:0 with GPU decode, train `args.size` float16, the device cache off,
    --gpu-priority `priority`; or with `synthetic` the hand-off alone (no
    decoding, no kernels of the server's: its samples are copied into the
    ring). The smoke run's ring is on the CPU."""
    opts = dict(batch_size=args.server_batch, window=args.window, size=args.size,
                device="cpu" if args.smoke else "cuda:0")
    if synthetic:
        opts["synthetic"] = 100000
        return opts
    opts.update(dtype="float16", transform="train", workers=args.workers)
    if not args.smoke:
        opts.update(decode="gpu", device_cache_mb=0, transcode_cache_mb=args.transcode_cache_mb,
                    nvjpeg_calls=args.nvjpeg_calls, nvjpeg_region=args.nvjpeg_region == "on",
                    gpu_priority=priority)
    return opts


# MPS: a client's share of the SMs, in per cent (--trainer-sm-share, --server-sm-share).
SM_SHARE = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"


def server_env(args, environ):
    """The server process's environment: `environ` with the server's SM share
    (--server-sm-share) instead of whatever share it had (the trainer's)."""
    env = {k: v for k, v in environ.items() if k != SM_SHARE}
    if args.server_sm_share:
        env[SM_SHARE] = str(args.server_sm_share)
    return env


class ServerProc:
    """A batchcast-server process serving `data` (stopped by stop())."""

    def __init__(self, build, data, name, args, log_path, synthetic=False, extra=()):
        import batchcast

        self.batchcast = batchcast
        self.name = name
        cmd = [os.path.join(build, "tools", "batchcast-server"), "serve", "--name", name,
               "--status-interval", "0"] + ([] if synthetic else [data])
        cmd += serve_flags(server_options(args, args.gpu_priority, synthetic))
        cmd += list(extra)  # more serve options
        # BC_SERVER_PREFIX (e.g. "env CUDA_INJECTION64_PATH=/tmp/libcupti_trace.so
        # BC_CUPTI_DIR=OUT", benchmarks/cupti_trace.cc) is put before the command.
        cmd = os.environ.get("BC_SERVER_PREFIX", "").split() + cmd
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=server_env(args, os.environ))
        deadline = time.monotonic() + 300
        while True:
            try:
                self.stats()
                break
            except Exception:  # noqa: BLE001 - not up yet
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the server did not start; see {log_path}")
                time.sleep(0.1)

    def stats(self):
        return self.batchcast.query_stats(self.name, timeout=5)

    def cpu(self):
        from batchcast._proc import cpu_seconds  # the package's /proc reader

        return cpu_seconds(self.proc.pid)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class InProcServer:
    """The same server as ServerProc's, run by batchcast.Server in this
    process, the trainer's: its decode and kernels share the trainer's CUDA
    context, so the GPU does not time-slice between them (Note [Server
    stream priority]); `priority` is its --gpu-priority. Same interface as
    ServerProc; cpu() counts the server's own threads."""

    def __init__(self, data, name, args, priority):
        import batchcast

        self.name = name
        self.server = batchcast.Server(data, name=name, **server_options(args, priority))

    def stats(self):
        return self.server.stats()

    def cpu(self):
        from batchcast._proc import server_thread_cpu_seconds

        return server_thread_cpu_seconds(os.getpid())

    def stop(self):
        self.server.close()


class PacedPuller:
    """A thread of this process that takes batches from `server` (its .name)
    at `rate` images/s through a batchcast.Loader and drops them: with an
    InProcServer, the server's work at the fed rate, in the trainer's
    process, without the trainer's steps waiting on it (the in-process
    analogue of --paced). Use as a context manager; `images_per_s` once it
    has stopped."""

    def __init__(self, server, args, rate):
        self.name, self.batch, self.rate = server.name, args.loader_batch, float(rate)
        self.stop_event = threading.Event()
        self.images, self.wall, self.error = 0, 0.0, None
        self.thread = threading.Thread(target=self._run, name="paced-puller", daemon=True)

    def _run(self):
        import batchcast

        try:
            with batchcast.Loader(self.name, batch_size=self.batch, timeout=120,
                                  name="paced") as loader:
                t0 = time.monotonic()
                while not self.stop_event.is_set():
                    for batch in loader:
                        del batch
                        self.images += self.batch
                        delay = t0 + self.images / self.rate - time.monotonic()
                        if delay > 0:
                            self.stop_event.wait(delay)
                        if self.stop_event.is_set():
                            break
                self.wall = time.monotonic() - t0
        except Exception as e:  # reported with the result, not lost in the thread
            self.error = repr(e)

    @property
    def images_per_s(self):
        return self.images / self.wall if self.wall > 0 else 0.0

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        self.thread.join(timeout=60)


def stage_shares(before, after, wall):
    """{stage: share of the wall time} between two stats (worker-seconds / wall)."""
    b, a = before.get("producer_stage_s", {}), after.get("producer_stage_s", {})
    return {k: (a[k] - b.get(k, 0.0)) / wall for k in a}


def server_usage(args, server, before, wall):
    """What `server` did over the `wall` seconds since `before` (its stats()
    and cpu() then): its images/s (batches written), CPU cores and stage
    shares; and its stats now."""
    s0, c0 = before
    s1, c1 = server.stats(), server.cpu()
    batches = s1.get("batches_written", 0) - s0.get("batches_written", 0)
    return {"server_images_per_s": batches * args.server_batch / wall,
            "server_cores": (c1 - c0) / wall,
            "stage_share": stage_shares(s0, s1, wall)}, s1


def consumer_wait(before, after, name):
    def find(s):
        for c in s.get("consumers", []):
            if c.get("name") == name:
                return c.get("wait_s", 0.0)
        return 0.0

    return find(after) - find(before)


def read_rate(server, args, name):
    """One consumer reading as fast as it can: images/s, server cores, stages, waits."""
    import batchcast

    if args.smoke:  # no torch: the native consumer
        c = batchcast._core.Consumer(server.name, args.loader_batch, True, "immediate", 2, 60.0,
                                     10.0, name)

        def batches():
            while True:
                item = c.next()
                if item is not None:
                    yield len(item[1])

        close = c.close
    else:
        import torch

        loader = batchcast.Loader(server.name, batch_size=args.loader_batch, timeout=120, name=name)

        def batches():
            while True:
                for images, _ in loader:
                    n = images.shape[0]
                    del images
                    yield n

        def close():
            torch.cuda.synchronize()
            loader.close()

    it = batches()
    t_end = time.monotonic() + args.warmup
    while time.monotonic() < t_end:
        next(it)
    s0, c0, t0, n = server.stats(), server.cpu(), time.monotonic(), 0
    while time.monotonic() < t0 + args.measure:
        n += next(it)
    wall = time.monotonic() - t0
    usage, s1 = server_usage(args, server, (s0, c0), wall)
    close()
    return {"images_per_s": n / wall, "seconds": wall, **usage,
            "stage_threads": s1.get("producer_stage_threads", {}),
            "consumer_wait_share": consumer_wait(s0, s1, name) / wall,
            "source_counters": s1.get("source_counters", {}), "mps": s1.get("mps"),
            "mps_detail": s1.get("mps_detail"), "source": s1.get("source")}


def bench_cmd(build, data, args, mode, seconds, *extra):
    """A gpu_pipeline_bench command: `mode` over `data` in the server's batches."""
    return [os.path.join(build, "benchmarks", "gpu_pipeline_bench"), data, "--batch",
            str(args.server_batch), "--seconds", str(seconds), "--modes", mode, *extra]


def last_json(text):
    """The last line of `text` that is a JSON object (gpu_pipeline_bench's result), or None."""
    lines = [line for line in text.splitlines() if line.startswith("{")]
    return json.loads(lines[-1]) if lines else None


def decode_only(build, data, args):
    # The files in page-locked memory, as the server passes them (Note [Pinned
    # bitstreams]): the faster of gpu_pipeline_bench's inputs.
    out = subprocess.run(bench_cmd(build, data, args, "decode", args.measure,
                                   "--nvjpeg-input", "pinned"),
                         capture_output=True, text=True, timeout=240)
    if out.returncode != 0 or last_json(out.stdout) is None:
        raise RuntimeError("gpu_pipeline_bench failed: " + out.stderr[-2000:])
    return last_json(out.stdout)


def train_rate(args, server=None, info=None, pull_only=False, sync_steps=False):
    """ResNet-18, bs 128, bf16 autocast, channels_last: images/s on synthetic data, or
    fed by `server` (a ServerProc).

    With a dict `info` (and a server), also fills it with what the server's
    stats say about the measured window: the producer's stage shares, its CPU
    cores, its images/s (batches written) and the share of the time the
    trainer's Next() waited for data (does the trainer wait for the server,
    or the GPU?). pull_only: each step takes a batch from `server` and drops
    it, and trains on the synthetic tensors (what pulling alone does to the
    server). sync_steps: torch.cuda.synchronize() after every step."""
    import torch
    import torchvision

    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet18(num_classes=1000).cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    bs = args.train_batch
    x = torch.randn(bs, 3, args.size, args.size, device="cuda").to(torch.bfloat16)
    y = torch.randint(0, 1000, (bs,), device="cuda")
    if server is None:

        def data():
            while True:
                yield x, y

        close = lambda: None  # noqa: E731
    else:
        import batchcast

        loader = batchcast.Loader(server.name, batch_size=bs, timeout=120, name="resnet18")

        def data():
            while True:
                for batch in loader:
                    if pull_only:
                        del batch
                        yield x, y
                    else:
                        yield batch

        close = loader.close
    it = data()

    def step():
        images, labels = next(it)
        if images.dtype == torch.uint8:  # a --synthetic server's samples
            images = images.to(torch.bfloat16)
        xb = images.contiguous(memory_format=torch.channels_last)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(xb), labels % 1000)
        del images
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if sync_steps:
            torch.cuda.synchronize()
        return loss

    t_end = time.monotonic() + args.warmup
    while time.monotonic() < t_end:
        step().item()
    torch.cuda.synchronize()
    if info is not None:
        s0, c0 = server.stats(), server.cpu()
    t0, n = time.monotonic(), 0
    while time.monotonic() < t0 + args.measure:
        loss = step()
        n += bs
    loss.item()
    wall = time.monotonic() - t0
    if info is not None:
        # Before close(): the consumer is still listed.
        usage, s1 = server_usage(args, server, (s0, c0), wall)
        info.update({**usage, "trainer_wait_share": consumer_wait(s0, s1, "resnet18") / wall})
    close()
    return n / wall


def fed_pairs(args, server, info=None):
    """The trainer on synthetic data, then fed by `server`, --repeat times:
    the trainer's own rate drifts by several per cent between windows, so
    each fed window is compared with the synthetic one just before it, and
    the median of those ratios is the figure. `info` gets what the server's
    stats say of the last fed window (train_rate)."""
    pairs = []
    for _ in range(args.repeat):
        synthetic = train_rate(args)
        if info is not None:
            info.clear()
        pairs.append([synthetic, train_rate(args, server, info)])
    return {"pairs": pairs, "synthetic": statistics.median(p[0] for p in pairs),
            "fed": statistics.median(p[1] for p in pairs),
            "ratio": statistics.median(p[1] / p[0] for p in pairs)}


def beside_seconds(args):
    """--seconds for a gpu_pipeline_bench run that outlasts train_rate beside it."""
    return args.warmup + args.measure + 10


def train_beside(args, cmd, server=None):
    """ResNet-18 on synthetic data (or fed by `server`, a ServerProc) while
    `cmd` (a gpu_pipeline_bench run of beside_seconds(args)) runs beside it:
    the trainer's images/s, and the
    bench's result once it has ended (its images/s and cores: did it keep its
    pace beside the trainer?) or {"error": ...}."""
    bench = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(5)  # its files loaded (fill: its first epoch), running
        trainer = train_rate(args, server)
    finally:
        try:
            out, err = bench.communicate(timeout=90)  # a profiler prefix writes its report
        except subprocess.TimeoutExpired:
            bench.kill()
            out, err = bench.communicate()
    got = last_json(out)
    if bench.returncode != 0 or got is None:
        got = {"error": (err or out)[-1000:], "returncode": bench.returncode}
    return trainer, got


def stages_text(shares, threads=None):
    """"read 20%, hw_decode 80% (x2), ...": stage shares of the wall time."""
    threads = threads or {}
    return ", ".join(f"{k} {v * 100:.0f}%" + (f" (x{threads[k]})" if threads.get(k, 1) > 1 else "")
                     for k, v in shares.items())


def pairs_text(pairs, what="pairs"):
    """", the median of 3 pairs: 0.90, 0.95, 1.00" (nothing for one pair)."""
    if len(pairs) < 2:
        return ""
    return f", the median of {len(pairs)} {what}: " + ", ".join(f"{b / a:.2f}" for a, b in pairs)


def in_process_lines(r, ref):
    """The summary lines of the --in-process runs (the server in the trainer's process)."""
    lines = []
    for priority, got in r.get("in_process", {}).items():
        lines.append(f"in the trainer's process (batchcast.Server, one CUDA context), "
                     f"--gpu-priority {priority}:")
        rd = got.get("read")
        if rd:
            lines.append(f"  server -> one Loader: {rd['images_per_s']:,.0f} img/s"
                         + (f" = {rd['images_per_s'] / ref:.2f} of decode-only" if ref else "")
                         + f"; server threads {rd['server_cores']:.2f} cores; stages "
                         + stages_text(rd["stage_share"], rd["stage_threads"]))
        if "ratio" in got:
            fs = got.get("server", {})
            lines.append(f"  ResNet-18 fed: {got['fed']:,.0f} img/s, synthetic {got['synthetic']:,.0f}"
                         f" (medians); fed / synthetic = {got['ratio']:.2f}"
                         + pairs_text(got["pairs"]))
            if fs:
                lines.append(f"  while fed: Next() waited {fs['trainer_wait_share'] * 100:.0f}% "
                             f"of the time; server threads {fs['server_cores']:.2f} cores, "
                             f"{fs['server_images_per_s']:,.0f} img/s; stages "
                             + stages_text(fs["stage_share"]))
        if "synthetic_beside_paced_pull" in got:
            x, pull = got["synthetic_beside_paced_pull"], got["paced_pull"]
            lines.append(f"  synthetic beside this server pulled by a thread at the fed rate: "
                         f"{x:,.0f} img/s = {x / got['synthetic']:.2f} (the puller got "
                         f"{pull['images_per_s']:,.0f} img/s"
                         + (f"; error {pull['error']}" if pull["error"] else "") + ")")
    return lines


def summary(r):
    lines = [f"{r.get('device', 'cpu (smoke run)')}; device cache: OFF (--device-cache-mb 0); "
             f"CUDA hardware queues: {r.get('hardware_queues') or 'unset (8)'}"]
    rd = r.get("read")
    if rd:
        lines += [f"MPS: {rd.get('mps')} ({rd.get('mps_detail')})",
                  f"server source: {rd.get('source')}"]
    if r.get("decode_only"):
        d = r["decode_only"]
        lines.append(f"decode-only reference backend: {d.get('backend')} (files in "
                     f"{'page-locked' if d.get('input') == 'pinned' else 'pageable'} memory)")
    counters = rd["source_counters"] if rd else {}
    if counters.get("files") and "files_gpu_decodable" in counters:
        hw = counters["files_gpu_decodable"]
        lines.append(f"dataset: {counters['files']} files, {counters['files'] - hw} "
                     f"({100 * (counters['files'] - hw) / counters['files']:.1f} %) refused by the "
                     "hardware engine")
    ref = r.get("decode_only", {}).get("images_per_s")
    runs = ", ".join(f"{x:,.0f}" for x in r.get("decode_only_runs", []))
    if rd:
        lines.append(f"server -> one Loader: {rd['images_per_s']:,.0f} img/s"
                     + (f" = {rd['images_per_s'] / ref:.2f} of nvJPEG decode-only "
                        f"{ref:,.0f} img/s (the higher of {runs}, before and after; goal >= 0.90)"
                        if ref else ""))
        lines.append(f"server CPU: {rd['server_cores']:.2f} cores (goal <= 2)")
        lines.append("stages (share of wall time; pool stages are summed over their threads): "
                     + stages_text(rd["stage_share"], rd["stage_threads"]))
        lines.append(f"consumer waited {rd['consumer_wait_share'] * 100:.0f}% of the time "
                     "(server-side)")
    if "train_synthetic" in r:
        s, f = r["train_synthetic"], r["train_fed"]
        pairs = r.get("train_pairs", [[s, f]])
        lines.append(f"ResNet-18 bs {r['args']['train_batch']} bf16 channels_last: synthetic "
                     f"{s:,.0f} img/s, fed by the server {f:,.0f} img/s (medians); fed / "
                     f"synthetic = {r.get('train_fed_ratio', f / s):.2f} (goal >= 0.90; >= 0.95 "
                     "under MPS)" + pairs_text(pairs))
        fs = r.get("train_fed_server")
        if fs:
            lines.append("  while fed: the trainer's Next() waited "
                         f"{fs['trainer_wait_share'] * 100:.0f}% of the time; server "
                         f"{fs['server_cores']:.2f} cores; stages " + stages_text(fs["stage_share"]))
        for key, what in (("decode_only", "an nvJPEG decode-only process (no server)"),
                          ("paced_decode", "an nvJPEG decode-only process paced at the fed rate"),
                          ("paced_fill", "a FillBatch process (the server's GPU work, no "
                                         "hand-off) paced at the fed rate")):
            if f"train_synthetic_beside_{key}" in r:
                x, b = r[f"train_synthetic_beside_{key}"], r[f"beside_{key}"]
                got = (f"it ran at {b['images_per_s']:,.0f} img/s" if "images_per_s" in b
                       else f"it failed: {b['error']}")
                lines.append(f"  synthetic beside {what}: {x:,.0f} img/s = {x / s:.2f} ({got})")
        if "train_fed_synthetic_server" in r:
            h = r["train_fed_synthetic_server"]
            hp = r.get("train_handoff_pairs", [])
            lines.append(f"  fed by a --synthetic server (hand-off only, no decoding): "
                         f"{h:,.0f} img/s = {r.get('train_handoff_ratio', h / s):.2f}"
                         + pairs_text(hp, "pairs with synthetic"))
    return "\n".join(lines + in_process_lines(r, ref))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--data", help="an ImageFolder to use instead of making one")
    p.add_argument("--build")
    p.add_argument("--smoke", action="store_true", help="CPU, tiny, seconds: no GPU parts")
    p.add_argument("--classes", type=int, default=100)
    p.add_argument("--per-class", type=int, default=40)
    p.add_argument("--workers", type=int, default=2, help="the server's fallback decoders")
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--server-batch", type=int, default=256)
    p.add_argument("--window", type=int, default=8, help="the server's")
    p.add_argument("--loader-batch", type=int, default=256)
    p.add_argument("--train-batch", type=int, default=128)
    p.add_argument("--hardware-queues", type=int, choices=range(1, 33), metavar="1..32",
                   help="CUDA_DEVICE_MAX_CONNECTIONS for this process, the server and the "
                   "decode-only reference (default: CUDA's 8, or 32 with --in-process-only, "
                   "as batchcast.Server sets it; Note [Hardware queues])")
    p.add_argument("--mps", choices=("off", "on"), default="off",
                   help="on: start NVIDIA MPS (batchcast._mps) for the server and the trainer")
    p.add_argument("--trainer-sm-share", type=int, choices=range(1, 101), metavar="1..100",
                   help="with --mps on: this process's (the trainer's) share of the SMs, in per "
                   "cent (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE), in its synthetic windows too")
    p.add_argument("--server-sm-share", type=int, choices=range(1, 101), metavar="1..100",
                   help="with --mps on: the server process's share of the SMs, in per cent")
    p.add_argument("--transcode-cache-mb", type=int, default=1024,
                   help="the server's (0: progressive files decoded on the CPU pool)")
    p.add_argument("--nvjpeg-calls", type=int, default=1,
                   help="the server's (Note [Split hardware batch])")
    p.add_argument("--nvjpeg-region", choices=("on", "off"), default="on",
                   help="the server's: off decodes whole images (Note [Region decode])")
    p.add_argument("--gpu-priority", choices=("normal", "high"), default="normal",
                   help="the server process's --gpu-priority")
    p.add_argument("--in-process", default="",
                   help="also: the trainer fed by a batchcast.Server in its own process (one "
                        "CUDA context) at each of these --gpu-priority values, e.g. normal,high")
    p.add_argument("--handoff", action="store_true",
                   help="also: ResNet-18 fed by a --synthetic server (the hand-off without "
                        "the server's decoding)")
    p.add_argument("--interference", action="store_true",
                   help="also: ResNet-18 on synthetic data beside an nvJPEG decode-only process")
    p.add_argument("--paced", action="store_true",
                   help="also: ResNet-18 on synthetic data beside a decode-only and a FillBatch "
                        "process paced at the fed rate (the server's GPU work, no hand-off); "
                        "with --in-process, beside the in-process server pulled by a thread at "
                        "the fed rate")
    p.add_argument("--in-process-only", action="store_true",
                   help="only the --in-process runs: no server process (steps 3-4)")
    p.add_argument("--no-reference", action="store_true",
                   help="skip the decode-only reference and the Loader's rate (trainer rates only)")
    p.add_argument("--repeat", type=int, default=1,
                   help="measure the trainer on synthetic data then fed this many times, "
                        "alternately; the median ratio is the figure (--handoff too)")
    p.add_argument("--warmup", type=float, default=5)
    p.add_argument("--measure", type=float, default=15)
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    args.in_process = [x for x in args.in_process.split(",") if x]
    if args.in_process_only and not args.in_process:
        p.error("--in-process-only needs --in-process")
    if args.in_process_only and args.handoff:
        p.error("--handoff compares with the server process: not with --in-process-only")
    if (args.trainer_sm_share or args.server_sm_share) and args.mps != "on":
        p.error("--trainer-sm-share and --server-sm-share need --mps on")
    for x in args.in_process:
        if x not in ("normal", "high"):
            p.error(f"--in-process takes normal and/or high, got {x!r}")
    if args.smoke:
        args.classes, args.per_class, args.size = 2, 12, 32
        args.server_batch = args.loader_batch = 8
        args.warmup, args.measure, args.workers = 0.5, 1.5, 1
    return args


def main(argv=None):
    args = parse_args(argv)
    build = find_build(args.build)
    os.makedirs(args.out, exist_ok=True)
    data = args.data or os.path.join(
        "/tmp", f"bc_gpu_producer_{args.classes}x{args.per_class}")
    t_start = time.monotonic()
    # Note [Hardware queues]: CUDA_DEVICE_MAX_CONNECTIONS for this process
    # and the processes it starts; without --hardware-queues CUDA's default,
    # except that --in-process-only starts CUDA with the 32 that
    # batchcast.Server would have set had the trainer created it first (it
    # measures synthetic windows before).
    if args.hardware_queues:
        os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = str(args.hardware_queues)
    elif args.in_process_only:
        os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")
    mps = None
    if args.mps == "on" and not args.smoke:
        # Before any CUDA work of this process and the server's (batchcast/_mps.py).
        from batchcast._mps import Mps

        mps = Mps.start("on")
        os.environ.update(mps.env)
        if args.trainer_sm_share:
            # After the daemon started (its own environment sets every client's default).
            os.environ[SM_SHARE] = str(args.trainer_sm_share)
    try:
        return run(args, build, data, t_start)
    finally:
        if mps is not None:
            mps.stop()


def process_server(args, build, data, name, result):
    """Steps 3-4: the server process, one Loader's rate, the fed trainer's pairs."""
    server = ServerProc(build, data, name, args, os.path.join(args.out, "server.log"))
    try:
        if args.smoke or not args.no_reference:
            result["read"] = read_rate(server, args, "reader")
        if not args.smoke and not args.no_reference:
            # The reference again, right after: the engine's rate moves between
            # runs and hosts (12k-33k img/s seen on H100s); the higher of the
            # two is the reference (the conservative ratio).
            after = decode_only(build, data, args)
            result["decode_only_runs"] = [result["decode_only"]["images_per_s"],
                                          after["images_per_s"]]
            if after["images_per_s"] > result["decode_only"]["images_per_s"]:
                result["decode_only"] = after
        if not args.smoke:
            result["train_fed_server"] = {}
            fed = fed_pairs(args, server, result["train_fed_server"])
            result.update({"train_pairs": fed["pairs"], "train_synthetic": fed["synthetic"],
                           "train_fed": fed["fed"], "train_fed_ratio": fed["ratio"]})
    finally:
        server.stop()


def run(args, build, data, t_start):
    make_dataset(args, data)
    result = {"args": vars(args), "data": data, "device_cache": False,
              "dataset_bytes": warm_page_cache(data),
              "hardware_queues": os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS")}
    if not args.smoke:
        import torch

        result["device"] = torch.cuda.get_device_name(0)
        if not args.no_reference:
            result["decode_only"] = decode_only(build, data, args)
    name = f"gpuprod-{os.getpid()}"
    if not args.in_process_only:
        process_server(args, build, data, name, result)
    for priority in args.in_process:
        # The same server in the trainer's own process (one CUDA context).
        inproc = InProcServer(data, f"{name}-inproc-{priority}", args, priority)
        try:
            got = {}
            if args.smoke or not args.no_reference:
                got["read"] = read_rate(inproc, args, "reader")
            if not args.smoke:
                got["server"] = {}
                got.update(fed_pairs(args, inproc, got["server"]))
            if args.paced and not args.smoke:
                # The trainer on synthetic data while this server serves a
                # puller in the same process at the fed rate.
                with PacedPuller(inproc, args, got["fed"]) as puller:
                    time.sleep(2)
                    got["synthetic_beside_paced_pull"] = train_rate(args)
                got["paced_pull"] = {"images_per_s": puller.images_per_s,
                                     "error": puller.error}
            result.setdefault("in_process", {})[priority] = got
        finally:
            inproc.stop()
    if args.interference and not args.smoke:
        # The same trainer on synthetic data while another process runs the
        # nvJPEG hardware decode-only loop: what the engine's work alone costs it.
        result["train_synthetic_beside_decode_only"], result["beside_decode_only"] = train_beside(
            args, bench_cmd(build, data, args, "decode", beside_seconds(args)))
    if args.paced and not args.smoke and not args.in_process_only:
        # What the server's GPU work costs the trainer without the hand-off:
        # the same trainer beside a process doing that work at the fed rate.
        pace = ["--rate", str(result["train_fed"])]
        fill = bench_cmd(build, data, args, "fill", beside_seconds(args), *pace, "--workers",
                         str(args.workers), "--transcode-cache-mb", str(args.transcode_cache_mb),
                         "--nvjpeg-calls", str(args.nvjpeg_calls),
                         "--nvjpeg-region" if args.nvjpeg_region == "on" else "--no-nvjpeg-region")
        for mode, cmd in (("decode", bench_cmd(build, data, args, "decode", beside_seconds(args),
                                               *pace)),
                          ("fill", os.environ.get("BC_PACED_PREFIX", "").split() + fill)):
            result[f"train_synthetic_beside_paced_{mode}"], result[f"beside_paced_{mode}"] = (
                train_beside(args, cmd))
    if args.handoff and not args.smoke:
        # Where a fed trainer loses its time: the same trainer fed by a
        # server that only copies synthetic samples into the device ring.
        synth = ServerProc(build, data, name + "-synth", args,
                           os.path.join(args.out, "server_synthetic.log"), synthetic=True)
        try:
            fed = fed_pairs(args, synth)
            result.update({"train_handoff_pairs": fed["pairs"],
                           "train_fed_synthetic_server": fed["fed"],
                           "train_handoff_ratio": fed["ratio"]})
        finally:
            synth.stop()
    result["seconds"] = time.monotonic() - t_start
    with open(os.path.join(args.out, "gpu_producer.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(summary(result))
    print(f"({result['seconds']:.0f} s; {os.path.join(args.out, 'gpu_producer.json')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
