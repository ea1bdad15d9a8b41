#!/usr/bin/env python3
"""What slows a server's decode beside the trainer it feeds (issue 9).

Without MPS a ResNet-18 fed by the server runs at about 0.68 of synthetic
data: beside that trainer the server's nvJPEG hardware decode runs at about
7k images/s, while a FillBatch process beside the same kind of trainer
reaches 13-16k (benchmarks/RESULTS.md, "What couples a fed trainer to its
server"). This program runs the configurations that separate the causes, one
GPU-host call (about 4 minutes on an H100):

  python3 benchmarks/fed_coupling.py --out OUT [--data DIR] [--runs ...]

runs (comma-separated, default all, in this order):
  reader          server -> a reader process (batchcast.Loader), no trainer
  reader_beside   the same, with a trainer on synthetic data beside it
  fill_beside_fed gpu_pipeline_bench --modes fill, unpaced, beside a trainer
                  fed by a --synthetic server (decoding for nobody)
  idle_beside     a reader process drives the server; an idle consumer (it
                  took one batch, maps the ring, opened the slot events) in
                  another process; a trainer on synthetic data beside
  idle_in_trainer the same, the idle consumer in the trainer's process: does
                  mapping the ring in the busy context slow the server?
  pull_async      a thread of the trainer's process reads the server (own
                  CUDA stream, batches dropped) while the trainer trains on
                  synthetic tensors: the server's consumer is the busy
                  context, but not in step with its training
  pull_async_third
                  the same, with a third process beside whose CUDA context
                  runs a tiny kernel every millisecond: is it the number of
                  busy contexts?
  pull            the trainer takes its batches from the server, drops them
                  and trains on synthetic tensors
  pull_sync       the same, torch.cuda.synchronize() after every step
  fed             the trainer fed by the server

Prints, per run, the trainer's images/s as a share of the same trainer on
synthetic data alone (measured first), the server's (or the other process's)
images/s, its cores and stage shares (pull_async*: also how many of the
puller's batches were gathered copies rather than zero-copy); writes
OUT/fed_coupling.json. Device cache off, MPS as the environment has it;
gpu_producer.py's trainer, dataset and server settings (--workers 4). The
build is found from BATCHCAST_BUILD_DIR (or --build).
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gpu_producer as gp  # noqa: E402  (the trainer, the server, the dataset)

RUNS = ("reader", "reader_beside", "fill_beside_fed", "idle_beside", "idle_in_trainer",
        "pull_async", "pull_async_third", "pull", "pull_sync", "fed")
# idle_*: the server lets a consumer that holds it up jump forward after 10 ms
# (Note [Lag policy]), so an idle consumer does not stop it.
SKIP_IDLE = ("--lag-policy", "skip", "--lag-timeout", "0.01")


def reader_main(name, seconds, warmup):
    """The reader process: reads `name` for `seconds`; prints its images/s after `warmup`."""
    import batchcast
    import torch

    loader = batchcast.Loader(name, batch_size=256, timeout=120, name="reader")
    start = time.monotonic()
    t0, n = None, 0
    while time.monotonic() < start + seconds:
        for images, _ in loader:
            if t0 is None and time.monotonic() >= start + warmup:
                t0, n = time.monotonic(), 0
            n += images.shape[0]
            del images
            if time.monotonic() >= start + seconds:
                break
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    loader.close()
    if t0 is None:
        print(json.dumps({"error": f"no batch after {warmup} s"}))
        return 1
    print(json.dumps({"images_per_s": n / (time.monotonic() - t0)}))
    return 0


def open_idle(name):
    """A consumer of `name` that took one batch and then idles (its ring mapped)."""
    import batchcast

    # One sample, one request ahead: it pins at most two slots of the window.
    loader = batchcast.Loader(name, batch_size=1, prefetch=1, timeout=120,
                              name=f"idle-{os.getpid()}")
    images, labels = next(iter(loader))
    del images, labels
    return loader


def idle_main(name, seconds):
    """The idle consumer's process: open_idle, then sleeps `seconds` (or until killed)."""
    loader = open_idle(name)
    time.sleep(seconds)
    loader.close()
    return 0


def tick_main(period, seconds):
    """A third CUDA context: a one-element kernel and a synchronize every `period` s."""
    import torch

    x = torch.zeros(1, device="cuda")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        x.add_(1)
        torch.cuda.synchronize()
        time.sleep(period)
    return 0


def server_window(server, args, fn):
    """fn()'s result, and the server's images/s, cores and stage shares meanwhile."""
    before, t0 = (server.stats(), server.cpu()), time.monotonic()
    r = fn()
    usage, _ = gp.server_usage(args, server, before, time.monotonic() - t0)
    return r, usage


def main(argv=None):
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "--reader":  # the reader process (run "reader", "reader_beside")
        return reader_main(argv[1], float(argv[2]), float(argv[3]))
    if argv and argv[0] == "--idle":  # the idle consumer's process (run "idle_beside")
        return idle_main(argv[1], float(argv[2]))
    if argv and argv[0] == "--tick":  # the third context (run "pull_async_third")
        return tick_main(float(argv[1]), float(argv[2]))
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--data", help="an ImageFolder to use instead of making one")
    p.add_argument("--build")
    p.add_argument("--runs", default=",".join(RUNS))
    p.add_argument("--warmup", type=float, default=3)
    p.add_argument("--measure", type=float, default=8)
    mine = p.parse_args(argv)
    runs = mine.runs.split(",")
    for r in runs:
        if r not in RUNS:
            p.error(f"unknown run {r!r}: one of {', '.join(RUNS)}")
    args = gp.parse_args(["--out", mine.out, "--workers", "4", "--warmup", str(mine.warmup),
                          "--measure", str(mine.measure)])
    build = gp.find_build(mine.build)
    os.makedirs(mine.out, exist_ok=True)
    data = mine.data or os.path.join("/tmp", f"bc_gpu_producer_{args.classes}x{args.per_class}")
    gp.make_dataset(args, data)
    gp.warm_page_cache(data)
    import torch

    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"))
    result = {"device": torch.cuda.get_device_name(0), "data": data, "device_cache": False,
              "mps_pipe_directory": os.environ.get("CUDA_MPS_PIPE_DIRECTORY"),
              "alone": gp.train_rate(args)}
    alone = result["alone"]
    lines = [f"{result['device']}; ResNet-18 bs {args.train_batch} bf16 channels_last on "
             f"synthetic data alone: {alone:,.0f} img/s; device cache off"]

    def spawn(*role):
        """This program as a reader or idle consumer process (main()'s first lines)."""
        return subprocess.Popen([sys.executable, os.path.abspath(__file__), *map(str, role)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    def reader(server, seconds):
        return spawn("--reader", server.name, seconds, 3)

    def reader_result(proc):
        out, err = proc.communicate(timeout=120)
        return gp.last_json(out) or {"error": err[-800:]}

    def with_server(name, fn, synthetic=False, extra=()):
        server = gp.ServerProc(build, data, f"coupling-{name}-{os.getpid()}", args,
                               os.path.join(mine.out, f"server_{name}.log"), synthetic=synthetic,
                               extra=extra)
        try:
            return fn(server)
        finally:
            server.stop()

    def run_reader(server):
        proc = reader(server, mine.measure + 6)
        time.sleep(4)
        _, window = server_window(server, args, lambda: time.sleep(mine.measure))
        return {"reader": reader_result(proc), **window}

    def run_reader_beside(idle=None):
        """A reader process and a trainer on synthetic data beside it; with
        idle "process" or "trainer", also an idle consumer there."""
        def fn(server):
            # The reader's measured span (after its 3 s) lies within the
            # trainer's run, which outlasts it: the reader's rate is the
            # server's beside the trainer (the server's own counts would span
            # the trainer's run, partly without the reader).
            proc = reader(server, mine.warmup + mine.measure + 3)
            if idle == "trainer":
                loader = open_idle(server.name)
            elif idle == "process":
                other = spawn("--idle", server.name, mine.warmup + mine.measure + 20)
            time.sleep(3)
            try:
                trainer = gp.train_rate(args)
            finally:
                if idle == "trainer":
                    loader.close()
                elif idle == "process":
                    other.kill()
                    other.communicate()
            return {"trainer": trainer, "reader": reader_result(proc)}
        return fn

    def run_pull_async(third=False):
        def fn(server):
            import threading

            import batchcast

            stop = threading.Event()
            copies = {True: 0, False: 0}  # zero-copy: batches

            def pull():
                with torch.cuda.stream(torch.cuda.Stream()):
                    loader = batchcast.Loader(server.name, batch_size=256, timeout=120,
                                              name="puller")
                    while not stop.is_set():
                        for images, _ in loader:
                            copies[loader.zero_copy] += 1
                            del images
                            if stop.is_set():
                                break
                    loader.close()

            ticker = spawn("--tick", 0.001, mine.warmup + mine.measure + 30) if third else None
            thread = threading.Thread(target=pull)
            thread.start()
            time.sleep(3)
            try:
                trainer, window = server_window(server, args, lambda: gp.train_rate(args))
            finally:
                stop.set()
                thread.join(60)
                if ticker is not None:
                    ticker.kill()
                    ticker.communicate()
            return {"trainer": trainer, "gathered": copies[False], "zero_copy": copies[True],
                    **window}
        return fn

    def run_fill_beside_fed(synth):
        fill = gp.bench_cmd(build, data, args, "fill", gp.beside_seconds(args), "--workers",
                            str(args.workers), "--transcode-cache-mb",
                            str(args.transcode_cache_mb))
        trainer, got = gp.train_beside(args, fill, synth)
        return {"trainer": trainer, "fill": got}

    def run_trainer(**kw):
        def fn(server):
            info = {}
            trainer = gp.train_rate(args, server, info, **kw)
            return {"trainer": trainer, **info}
        return fn

    plan = {"reader": lambda: with_server("reader", run_reader),
            "reader_beside": lambda: with_server("reader_beside", run_reader_beside()),
            "fill_beside_fed": lambda: with_server("synthetic", run_fill_beside_fed, True),
            "idle_beside": lambda: with_server("idle_beside", run_reader_beside("process"),
                                               extra=SKIP_IDLE),
            "idle_in_trainer": lambda: with_server("idle_in_trainer", run_reader_beside("trainer"),
                                                   extra=SKIP_IDLE),
            "pull_async": lambda: with_server("pull_async", run_pull_async()),
            "pull_async_third": lambda: with_server("pull_async_third", run_pull_async(True)),
            "pull": lambda: with_server("pull", run_trainer(pull_only=True)),
            "pull_sync": lambda: with_server("pull_sync",
                                             run_trainer(pull_only=True, sync_steps=True)),
            "fed": lambda: with_server("fed", run_trainer())}
    result["runs"] = {}
    for name in runs:
        r = plan[name]()
        result["runs"][name] = r
        other = r.get("reader") or r.get("fill") or {}
        parts = [f"{name:16s}"]
        if "trainer" in r:
            parts.append(f"trainer {r['trainer'] / alone:.2f} of alone")
        if "images_per_s" in other:
            who = "reader" if "reader" in r else "fill"
            parts.append(f"{who} {other['images_per_s']:,.0f} img/s")
        elif "error" in other:
            parts.append(f"failed: {other['error'][-300:]}")
        if "server_images_per_s" in r:
            stages = ", ".join(f"{k} {v * 100:.0f}%" for k, v in sorted(r["stage_share"].items())
                               if v >= 0.005)
            parts.append(f"server {r['server_images_per_s']:,.0f} img/s on "
                         f"{r['server_cores']:.2f} cores ({stages})")
        if "gathered" in r:
            parts.append(f"puller batches gathered {r['gathered']} of "
                         f"{r['gathered'] + r['zero_copy']}")
        if "trainer_wait_share" in r:
            parts.append(f"trainer waited {r['trainer_wait_share'] * 100:.0f}%")
        lines.append("; ".join(parts))
        print(lines[-1], flush=True)
        with open(os.path.join(mine.out, "fed_coupling.json"), "w") as f:
            json.dump(result, f, indent=1)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
