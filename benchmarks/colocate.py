#!/usr/bin/env python3
"""Co-location benchmark: N training jobs on one GPU, fed three ways (issue 13).

N separate training processes (torchvision models, bf16 autocast, SGD) run
at once on one device, their data coming from

  synthetic   tensors made once on the device (data-unbound: the GPU's limit)
  dataloader  one torch DataLoader per job over an ImageFolder (RandomResizedCrop,
              flip, ToTensor, Normalize), the node's cores split among the jobs:
              max(1, (cores - N) // N) workers each (one core per job's own loop)
  batchcast   one batchcast-server over the same folder (ring on the device,
              GPU decode where built), each job a batchcast.Loader
  hosted      (only when asked: --sources ...,hosted) the same server run by
              batchcast.Server inside job 0's process, created before job 0
              starts CUDA (so with 32 hardware queues, Note [Hardware
              queues]); every job, job 0 too, a batchcast.Loader. One CUDA
              context fewer for the GPU to time-slice without MPS. These jobs
              are processes of their own, started for the first hosted row

each with NVIDIA MPS off and on (where nvidia-cuda-mps-control can start it).
For every (MPS, model, data, N) it reports per-job images/s and step time,
the images/s of all jobs together, the co-location speed-up

    delta = sum over jobs of (the job's step time alone) / (max co-located step time)

(Tabrizian 2020, eq. 4.1; "alone" = the same model, batch and data source
with N = 1 and the same MPS setting; > 1 means sharing the GPU beats running
the jobs one after another), the CPU cores spent on loading (DataLoader
workers, or the server process, from /proc) and by the jobs themselves, and
GPU memory per process (nvidia-smi, and torch's reserved memory).

Usage (GPU host; each command fits a 10-minute call: one model, MPS off and
on, N in 1,2,4,8, is about 4 minutes; --budget stops starting phases in time):

  python3 benchmarks/colocate.py --out OUT --models resnet18 --budget 540
  python3 benchmarks/colocate.py --out OUT --models resnet50 --budget 540
  python3 benchmarks/colocate.py --out OUT --models vit_b_32 --budget 540
  python3 benchmarks/colocate.py --out OUT --quick                   # ~1.5 min
  python3 benchmarks/colocate.py --plot-only A/colocate.json B/colocate.json ... --out DIR

  --jobs 1,2,4,8  --models resnet18,resnet50,vit_b_32  --sources synthetic,dataloader,batchcast
  --mps off,on  --batch-size resnet50=64,32 (per model; a list is dealt to the jobs in turn)
  --warmup 1.5 --measure 2.5 (seconds per phase)  --images 10000 (dataset size)

Smoke run (CPU, seconds): python3 benchmarks/colocate.py --smoke --out /tmp/colo

Writes OUT/colocate.json (every number, rewritten after each phase, so a
run cut short keeps what it measured), OUT/colocate.md (the table),
OUT/colocate_throughput.png and OUT/colocate_delta.png (matplotlib; without
it the plots are skipped with a note: make them elsewhere with --plot-only),
OUT/colocate-server.log and OUT/colocate-jobs.log (the processes' output).

How a phase runs: the job processes (kept across phases of one MPS setting
and N; a model change rebuilds the model) set up their model and data and
run two steps; then all start together at t0, train `warmup` seconds, and
the steps that end within the next `measure` seconds are timed (step time =
their span / their count; every step ends with loss.item(), so it includes
the GPU work). CPU is read from /proc at the window's ends. The dataset
lives in the page cache on both sides; the DataLoader decodes every image
every epoch; the server too (the files nvJPEG's hardware cannot take are
decoded on the CPU beside it every epoch: the device cache of Note
[CPU-decoded file cache] is off unless --device-cache-mb is given). One
epoch is read through the server before it is measured (page cache, warm-up).
"""
import argparse
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from bench_files import serve_flags  # noqa: E402
SOURCES = ("synthetic", "dataloader", "batchcast", "hosted")
DEFAULT_SOURCES = SOURCES[:3]
SERVED = ("batchcast", "hosted")  # the sources a batchcast server feeds
DEFAULT_MODELS = ("resnet18", "resnet50", "vit_b_32")
DEFAULT_BATCH = {"resnet18": 128, "resnet50": 64, "vit_b_32": 128, "vit_b_16": 32,
                 "efficientnet_b0": 64, "tiny_cnn": 32}
TAG = "COLO "  # job -> parent messages on the job's stdout start with this
STARTED = time.monotonic()  # --budget counts from here (the dataset's making included)


def add_build_to_path():
    """Puts the batchcast build (BATCHCAST_BUILD_DIR, else build/ or build-py/) on sys.path."""
    env = os.environ.get("BATCHCAST_BUILD_DIR")
    cands = [env, os.path.join(REPO, env)] if env else []
    for cand in cands + [os.path.join(REPO, "build"), os.path.join(REPO, "build-py")]:
        if cand and os.path.isdir(os.path.join(cand, "python", "batchcast")):
            path = os.path.join(os.path.abspath(cand), "python")
            if path not in sys.path:
                sys.path.insert(0, path)
            os.environ["PYTHONPATH"] = path + (os.pathsep + os.environ["PYTHONPATH"]
                                               if os.environ.get("PYTHONPATH") else "")
            return os.path.abspath(cand)
    return None


# =============================================================================
# The job process: one training job, driven by JSON commands on stdin.
# =============================================================================


class _Job:
    def __init__(self):
        import torch

        self.torch = torch
        self.model_key = None
        self.model = self.opt = None
        self.data = None  # (iterator, close)
        self.cfg = None

    def send(self, **msg):
        sys.stdout.write(TAG + json.dumps(msg) + "\n")
        sys.stdout.flush()

    # ---- setup ----

    def _build_model(self, cfg):
        torch = self.torch
        import torchvision

        key = (cfg["model"], cfg["size"], cfg["device"])
        if key == self.model_key:
            return
        self.model = self.opt = None
        if cfg["device"].startswith("cuda"):
            torch.cuda.empty_cache()
        name = cfg["model"]
        if name == "tiny_cnn":
            nn = torch.nn
            model = nn.Sequential(
                nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 1000))
        elif name.startswith("vit_"):
            model = getattr(torchvision.models, name)(image_size=cfg["size"])
        else:
            model = getattr(torchvision.models, name)(num_classes=1000)
        model = model.to(cfg["device"])
        if not name.startswith("vit_"):
            model = model.to(memory_format=torch.channels_last)
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
        self.model_key = key

    def _open_data(self, cfg):
        torch = self.torch
        dev, bs, size = cfg["device"], cfg["batch_size"], cfg["size"]
        if cfg["source"] == "synthetic":
            dtype = torch.bfloat16 if cfg["amp"] else torch.float32
            images = torch.randn(bs, 3, size, size, device=dev).to(dtype)
            labels = torch.randint(0, 1000, (bs,), device=dev)

            def forever():
                while True:
                    yield images, labels

            return forever(), lambda: None
        if cfg["source"] == "dataloader":
            import torchvision
            import torchvision.transforms as T

            tf = T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.ToTensor(),
                            T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
            ds = torchvision.datasets.ImageFolder(cfg["data"], transform=tf)
            w = cfg["workers"]
            loader = torch.utils.data.DataLoader(
                ds, batch_size=bs, shuffle=True, num_workers=w, drop_last=True,
                pin_memory=dev.startswith("cuda"), persistent_workers=w > 0)
        else:
            import batchcast

            batchcast.set_log_level("warn")
            loader = batchcast.Loader(cfg["endpoint"], batch_size=bs, timeout=120,
                                      name=f"colocate-job{cfg['index']}")

        def endless():
            while True:
                yield from loader

        it = endless()

        def close():
            it.close()
            if hasattr(loader, "close"):
                loader.close()

        return it, close

    def setup(self, cfg):
        torch = self.torch
        self.teardown()
        self.cfg = cfg
        torch.set_num_threads(cfg["threads"])
        if cfg["device"].startswith("cuda"):
            torch.backends.cudnn.benchmark = True
        self._build_model(cfg)
        self.data = self._open_data(cfg)
        if cfg["device"].startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        for _ in range(cfg["setup_steps"]):  # cudnn autotuning, workers started, first batches
            self._step()
        self.send(ready=True)

    def teardown(self):
        if self.data is not None:
            self.data[1]()
            self.data = None
            import gc

            gc.collect()

    # ---- training ----

    def _step(self):
        torch, cfg = self.torch, self.cfg
        t0 = time.monotonic()
        images, labels = next(self.data[0])
        t1 = time.monotonic()
        dev = cfg["device"]
        x = images.to(dev, non_blocking=True)
        if not cfg["model"].startswith("vit_"):
            x = x.contiguous(memory_format=torch.channels_last)
        labels = labels.to(dev, non_blocking=True) % 1000
        del images  # a batchcast batch's lease ends with its last tensor
        with torch.autocast(device_type=dev.split(":")[0], dtype=torch.bfloat16,
                            enabled=cfg["amp"]):
            loss = torch.nn.functional.cross_entropy(self.model(x), labels)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        loss.item()  # waits for the GPU: the step's end is the work's end
        return t0, t1, time.monotonic()

    def go(self, cmd):
        ws = cmd["t0"] + cmd["warmup"]
        we = ws + cmd["measure"]
        while time.monotonic() < cmd["t0"]:
            time.sleep(0.001)
        steps = []  # (start, data ready, end)
        while not steps or steps[-1][2] < we:
            steps.append(self._step())
        inside = [i for i, s in enumerate(steps) if ws < s[2] <= we]
        short = not inside
        if short:  # steps longer than the window: time the one that ends after it starts
            inside = [next(i for i, s in enumerate(steps) if s[2] > ws)]
        first, last = inside[0], inside[-1]
        span_start = steps[first - 1][2] if first > 0 else steps[0][0]
        span = steps[last][2] - span_start
        wait = sum(steps[i][1] - steps[i][0] for i in inside)
        step_time = span / len(inside)
        out = {"steps": len(inside), "step_s": step_time,
               "img_s": self.cfg["batch_size"] / step_time, "wait_frac": wait / span,
               "short_window": short}
        if self.cfg["device"].startswith("cuda"):
            mib = 1 << 20
            out["torch_reserved_mib"] = self.torch.cuda.memory_reserved() / mib
            out["torch_peak_mib"] = self.torch.cuda.max_memory_reserved() / mib
        self.teardown()
        self.send(**out)

    def drain(self, cmd):
        """Reads `samples` samples from a server without training (warms its caches)."""
        import batchcast

        loader = batchcast.Loader(cmd["endpoint"], batch_size=cmd["batch_size"], timeout=300,
                                  name="colocate-warmup")
        n = 0
        t = time.monotonic()
        while n < cmd["samples"]:
            for images, _ in loader:
                n += images.shape[0]
                del images
                if n >= cmd["samples"]:
                    break
        loader.close()
        self.send(drained=n, seconds=time.monotonic() - t)


def job_main(host=None):
    """`host`: batchcast.Server keywords (data included) of the server this
    job hosts (source "hosted"), started before anything here starts CUDA."""
    hosted = None
    job = _Job()
    if host is not None:
        import batchcast

        batchcast.set_log_level("info")
        try:
            hosted = batchcast.Server(host.pop("data"), **host)
        except Exception as e:  # noqa: BLE001 - the parent's hello says why
            job.send(error=f"batchcast.Server: {type(e).__name__}: {e}"[:500])
            return
    import torch

    job.send(hello=os.getpid(), torch=torch.__version__,
             gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
    for line in sys.stdin:
        cmd = json.loads(line)
        try:
            if cmd["cmd"] == "setup":
                job.setup(cmd["cfg"])
            elif cmd["cmd"] == "go":
                job.go(cmd)
            elif cmd["cmd"] == "skip":
                job.teardown()
                job.send(skipped=True)
            elif cmd["cmd"] == "drain":
                job.drain(cmd)
            elif cmd["cmd"] == "exit":
                break
        except Exception as e:  # noqa: BLE001 - reported to the parent (e.g. CUDA out of memory)
            tb = traceback.format_exc().strip().splitlines()
            job.send(error=f"{type(e).__name__}: {e}"[:500], where=" | ".join(tb[-3:])[:800])
            try:
                job.teardown()
            except Exception:  # noqa: BLE001
                pass
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    job.teardown()
    if hosted is not None:
        hosted.close()


# =============================================================================
# The parent: the matrix, the server, MPS, measurements, output.
# =============================================================================


class JobProc:
    """A job process and the messages it sends."""

    def __init__(self, index, env, log, host=None):
        self.index = index
        argv = [sys.executable, os.path.abspath(__file__), "--job"]
        if host is not None:  # batchcast.Server keywords of the server it hosts
            argv += ["--host", json.dumps(host)]
        self.proc = subprocess.Popen(argv,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                     env=env, text=True, bufsize=1)
        self.pid = self.proc.pid
        self.messages = queue.Queue()
        self._log = log
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith(TAG):
                self.messages.put(json.loads(line[len(TAG):]))
            else:
                self._log.write(f"[job {self.index}] {line}")
                self._log.flush()
        self.messages.put(None)

    def send(self, **cmd):
        try:
            self.proc.stdin.write(json.dumps(cmd) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def recv(self, timeout):
        try:
            msg = self.messages.get(timeout=timeout)
        except queue.Empty:
            return {"error": f"no answer in {timeout:.0f} s"}
        if msg is None:
            self.messages.put(None)
            return {"error": f"the job process exited ({self.proc.poll()}); see colocate-jobs.log"}
        return msg

    def stop(self):
        self.send(cmd="exit")
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def parse_batch_sizes(specs, models):
    """{model: [batch sizes dealt to jobs in turn]} from "B" or "MODEL=B1,B2" items."""
    out = {m: [DEFAULT_BATCH.get(m, 64)] for m in models}
    for spec in specs or []:
        if "=" in spec:
            model, _, sizes = spec.partition("=")
            targets = [model]
        else:
            sizes, targets = spec, list(models)
        for m in targets:
            out[m] = [int(b) for b in sizes.split(",")]
    return out


def gpu_memory_by_pid():
    """{pid: MiB} from nvidia-smi (None where it is missing or fails)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        r = subprocess.run([smi, "--query-compute-apps=pid,used_memory",
                            "--format=csv,noheader,nounits"], capture_output=True, text=True,
                           timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = {}
    for line in r.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit():
            try:
                out[int(parts[0])] = float(parts[1])
            except ValueError:
                pass
    return out


def sleep_until(t):
    while True:
        left = t - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, 0.05))


def server_options(args):
    """The benchmark's server as batchcast.Server keywords (Server passes
    them as serve flags, a hosting job as keywords)."""
    on_gpu = args.device.startswith("cuda")
    opts = dict(device=args.device if on_gpu else "cpu", batch_size=args.server_batch,
                window=args.server_window, size=args.size,
                dtype="bfloat16" if args.amp else "float32")
    if args.server_workers:
        opts["workers"] = args.server_workers
    return opts


class Server:
    """A batchcast-server process over the dataset, for one MPS setting;
    HostedServer (a subclass) the same server inside a job's process."""

    def __init__(self, args, env, log):
        self.name = f"colocate-{os.getpid()}-{int(time.time() * 1000) % 100000}"
        cmd = [args.server_bin, "--log-level", "info", "serve", args.data, "--name", self.name,
               "--status-interval", "0"]
        cmd += serve_flags(server_options(args))
        log.write(f"== {' '.join(cmd)}\n")
        log.flush()
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        self.pid = self.proc.pid
        self.bin = args.server_bin
        self._wait_up(args, "batchcast-server", "colocate-server.log")

    def _wait_up(self, args, what, log_name):
        import batchcast

        deadline = time.monotonic() + 300
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{what} exited with {self.proc.returncode}; see {log_name}")
            try:
                self.stats()
                break
            except batchcast.BatchcastError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self.epoch_len = int(self.stats().get("epoch_len", 0))
        self.warm = not args.device.startswith("cuda")  # the CPU path has no cache to warm

    def loading_cpu(self):
        """{key: CPU seconds} of the server, for CpuMeter.used."""
        from batchcast._proc import CpuMeter

        return CpuMeter.read([self.pid])

    def stats(self):
        import batchcast

        return batchcast.query_stats(self.name, timeout=5)

    def stat_text(self):
        """What `batchcast-server stat NAME` prints (for people)."""
        try:
            r = subprocess.run([self.bin, "stat", self.name], capture_output=True, text=True,
                               timeout=10)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"(batchcast-server stat failed: {e})"
        return (r.stdout or r.stderr).rstrip()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class HostedServer(Server):
    """Source "hosted": the server, a batchcast.Server, inside the process of
    `job` (a JobProc started with host=...; it lives and ends with it).
    Its CPU is that of its bc-* threads."""

    def __init__(self, args, name, job):
        self.name, self.proc, self.pid, self.bin = name, job.proc, job.pid, args.server_bin
        self._wait_up(args, "the hosting job", "colocate-jobs.log")

    def loading_cpu(self):
        from batchcast._proc import server_thread_cpu_seconds

        return {self.pid: server_thread_cpu_seconds(self.pid)}

    def stop(self):
        pass  # ends with its job (JobProc.stop)


class Bench:
    def __init__(self, args):
        self.args = args
        self.start = STARTED
        self.results = {"meta": self._meta(), "mps": {}, "runs": []}
        os.makedirs(args.out, exist_ok=True)
        self.job_log = open(os.path.join(args.out, "colocate-jobs.log"), "a")
        self.server_log = open(os.path.join(args.out, "colocate-server.log"), "a")

    def _meta(self):
        a = self.args
        return {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "host": os.uname().nodename,
                "cores": a.cores, "device": a.device, "size": a.size, "amp_bf16": a.amp,
                "data": a.data, "images": a.images, "warmup_s": a.warmup, "measure_s": a.measure,
                "server": {"batch_size": a.server_batch, "window": a.server_window,
                           "workers": a.server_workers or "auto"},
                "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:])}

    def elapsed(self):
        return time.monotonic() - self.start

    def over_budget(self, need):
        return self.args.budget and self.elapsed() + need > self.args.budget

    def save(self):
        compute_deltas(self.results["runs"])
        path = os.path.join(self.args.out, "colocate.json")
        with open(path + ".tmp", "w") as f:
            json.dump(self.results, f, indent=1)
        os.replace(path + ".tmp", path)

    # ---- the matrix ----

    def run(self):
        a = self.args
        for mode in a.mps:
            self.run_mps(mode)
        self.save()

    def run_mps(self, mode):
        from batchcast._mps import Mps

        try:
            mps = Mps.start("on" if mode == "on" else "off")
        except RuntimeError as e:
            self.results["mps"][mode] = f"not measured: {e}"
            print(f"MPS {mode}: not measured: {e}", flush=True)
            return
        self.results["mps"][mode] = mps.note
        if not self.args.demo:
            print(f"== MPS {mode}: {mps.note}", flush=True)
        env = {**os.environ, **mps.env, "PYTHONUNBUFFERED": "1",
               "OMP_NUM_THREADS": str(self.args.threads)}
        server = None
        try:
            if "batchcast" in self.args.sources:  # hosted: Bench.start_hosted
                server = Server(self.args, env, self.server_log)
            for n in self.args.jobs:
                if self.over_budget(8 + self.phase_seconds()):
                    print(f"budget: skipping N={n} and above (MPS {mode})", flush=True)
                    break
                self.run_jobs(mode, mps, n, env, server)
        except Exception as e:  # noqa: BLE001 - keep what was measured, say what failed
            self.results["mps"][mode] += f"; stopped by {type(e).__name__}: {e}"
            print(f"MPS {mode}: stopped by {type(e).__name__}: {e}", flush=True)
        finally:
            if server is not None:
                server.stop()
            mps.stop()

    def phase_seconds(self):
        return self.args.warmup + self.args.measure + 3.0

    def run_jobs(self, mode, mps, n, env, server):
        a = self.args
        procs = [JobProc(k, env, self.job_log) for k in range(n)]
        hosted = None  # (procs, HostedServer) of source "hosted", started at its first row
        try:
            hellos = [p.recv(300) for p in procs]
            bad = [h for h in hellos if "error" in h]
            if bad:
                print(f"N={n}: jobs did not start: {bad[0]['error']}", flush=True)
                return
            self.results["meta"].setdefault("torch", hellos[0].get("torch"))
            self.results["meta"].setdefault("gpu", hellos[0].get("gpu"))
            self.warm_up(server, procs[0])
            for model in a.models:
                sizes = a.batch_sizes[model]
                variants = [[sizes[k % len(sizes)] for k in range(n)]]
                if n == 1 and max(a.jobs) > 1:  # alone references for every batch size dealt
                    variants = [[b] for b in dict.fromkeys(sizes)]
                for source in a.sources:
                    for batches in variants:
                        if self.over_budget(self.phase_seconds()):
                            print(f"budget: skipping {model} {source} N={n} (MPS {mode})",
                                  flush=True)
                            continue
                        if source == "hosted" and hosted is None:
                            hosted = self.start_hosted(n, env)
                        if source != "hosted":
                            run = self.phase(mode, mps, model, source, batches, procs, server)
                        elif isinstance(hosted, str):  # the hosting job failed: say so per row
                            run = {"mps": mode, "model": model, "source": source, "jobs": n,
                                   "batch_sizes": batches, "dl_workers": None, "error": hosted}
                        else:
                            run = self.phase(mode, mps, model, source, batches, *hosted)
                        self.results["runs"].append(run)
                        self.save()
                        print(demo_row(run) if a.demo else row_text(run), flush=True)
        finally:
            for p in procs + (hosted[0] if isinstance(hosted, tuple) else []):
                p.stop()

    def warm_up(self, server, job):
        """One epoch through `server` (by `job`) before it is measured."""
        if server is not None and not server.warm:
            job.send(cmd="drain", endpoint=server.name, batch_size=self.args.server_batch,
                     samples=server.epoch_len)
            r = job.recv(600)
            server.warm = True
            print(f"server warm-up: {r}", flush=True)

    def start_hosted(self, n, env):
        """([n job processes], HostedServer), job 0 hosting the server (source
        "hosted"); or, where they did not start, why (a string)."""
        a = self.args
        name = f"colocate-hosted-{os.getpid()}-{n}"
        host = {"data": a.data, "name": name, **server_options(a)}
        procs = [JobProc(k, env, self.job_log, host=host if k == 0 else None) for k in range(n)]
        try:
            bad = [h["error"] for h in (p.recv(300) for p in procs) if "error" in h]
            if bad:
                raise RuntimeError(bad[0])
            server = HostedServer(a, name, procs[0])
            self.warm_up(server, procs[0])
        except Exception as e:  # noqa: BLE001 - every hosted row says why
            for p in procs:
                p.stop()
            print(f"N={n}: the hosting jobs did not start: {e}", flush=True)
            return f"the hosting jobs did not start: {e}"
        return procs, server

    def phase(self, mode, mps, model, source, batches, procs, server):
        a = self.args
        n = len(procs)
        workers = a.dl_workers if a.dl_workers is not None else max(1, (a.cores - n) // n)
        run = {"mps": mode, "model": model, "source": source, "jobs": n, "batch_sizes": batches,
               "dl_workers": workers if source == "dataloader" else None, "error": None}
        for k, p in enumerate(procs):
            cfg = {"index": k, "model": model, "batch_size": batches[k], "source": source,
                   "device": a.device, "size": a.size, "amp": a.amp, "threads": a.threads,
                   "data": a.data, "workers": workers,
                   "endpoint": server.name if server else None, "setup_steps": a.setup_steps}
            p.send(cmd="setup", cfg=cfg)
        ready = [p.recv(600) for p in procs]
        errors = [r["error"] for r in ready if "error" in r]
        if errors:
            for p, r in zip(procs, ready):
                if "error" not in r:
                    p.send(cmd="skip")
                    p.recv(60)
            run["error"] = errors[0]
            return run
        t0 = time.monotonic() + 0.2
        for p in procs:
            p.send(cmd="go", t0=t0, warmup=a.warmup, measure=a.measure)
        job_pids = [p.pid for p in procs]
        on_gpu = a.device.startswith("cuda")
        sleep_until(t0 + 0.3 * a.warmup)
        # Before the timed window (these fork processes): GPU memory, MPS servers,
        # and what `batchcast-server stat` shows while the jobs run.
        smi = gpu_memory_by_pid() if on_gpu else None
        mps_servers = mps.server_pids()
        served = source in SERVED
        stat_text = server.stat_text() if served else None
        ws, we = t0 + a.warmup, t0 + a.warmup + a.measure
        sleep_until(ws)
        before = self.cpu_reading(job_pids, server if served else None)
        stats0 = server.stats() if served else None
        sleep_until(we)
        after = self.cpu_reading(job_pids, server if served else None)
        stats1 = server.stats() if served else None
        results = [p.recv(max(120.0, 20 * a.measure)) for p in procs]
        errors = [r["error"] for r in results if "error" in r]
        if errors:
            run["error"] = errors[0]
            return run
        from batchcast._proc import CpuMeter

        span = after["t"] - before["t"]
        run["loading_cores"] = (CpuMeter.used(before["loading"], after["loading"]) / span
                                if source != "synthetic" else 0.0)
        run["jobs_cores"] = CpuMeter.used(before["jobs"], after["jobs"]) / span
        run["mps_active"] = bool(mps_servers) if mode == "on" else False
        for k, r in enumerate(results):
            r["gpu_mib_smi"] = smi.get(job_pids[k]) if smi else None
            r["cpu_cores"] = (after["jobs"].get(job_pids[k], 0) -
                              before["jobs"].get(job_pids[k], 0)) / span
        run["job"] = results
        run["img_s"] = sum(r["img_s"] for r in results)
        run["step_s_max"] = max(r["step_s"] for r in results)
        if smi:
            run["gpu_mib_total"] = sum(smi.values())
            if source == "batchcast":  # the server idles (but stays) during other rows
                run["server_gpu_mib_smi"] = smi.get(server.pid)  # hosted: in job 0's
        if stats1 is not None:
            run["server_samples_s"] = ((stats1["samples_published"] - stats0["samples_published"])
                                       / max(1e-9, span))
            run["server_blocked_frac"] = ((stats1["producer_blocked_s"] -
                                           stats0["producer_blocked_s"]) / max(1e-9, span))
            run["server_stats"] = compact_stats(stats1)
            run["server_stat_text"] = stat_text
        return run

    def cpu_reading(self, job_pids, server):
        from batchcast._proc import CpuMeter, descendants

        loading = (server.loading_cpu() if server is not None else
                   CpuMeter.read(descendants(job_pids)))
        return {"t": time.monotonic(), "jobs": CpuMeter.read(job_pids), "loading": loading}


def compact_stats(s):
    """The part of a server's stats a person reads: rate inputs, ring, consumers."""
    return {"samples_published": s.get("samples_published"), "slots": s.get("slots"),
            "producer_blocked_s": s.get("producer_blocked_s"),
            "slowest_lag_slots": s.get("slowest_lag_slots"),
            "consumers": [{k: c.get(k) for k in ("name", "batch_size", "samples", "lag_samples",
                                                 "leases")} for c in s.get("consumers", [])]}


# ---- derived numbers and output ----------------------------------------------


def compute_deltas(runs):
    """delta = sum_k alone(job k) / max_k step(job k), alone = the N=1 run of the same
    (MPS, model, source, batch size); None where that run is missing."""
    alone = {}
    for r in runs:
        if r.get("jobs") == 1 and not r.get("error"):
            alone[(r["mps"], r["model"], r["source"], r["batch_sizes"][0])] = r["job"][0]["step_s"]
    for r in runs:
        if r.get("error"):
            r["delta"] = None
            continue
        refs = [alone.get((r["mps"], r["model"], r["source"], b)) for b in r["batch_sizes"]]
        r["delta"] = None if None in refs else sum(refs) / r["step_s_max"]


def _fmt(v, spec=",.0f", none="-"):
    return none if v is None else format(v, spec)


def row_text(r):
    head = f"MPS {r['mps']:<3} {r['model']:<10} {r['source']:<10} N={r['jobs']}"
    if r.get("error"):
        return f"{head}  error: {r['error']}"
    per = " ".join(_fmt(j["img_s"]) for j in r["job"])
    return (f"{head}  {_fmt(r['img_s']):>7} img/s ({per})  step {r['step_s_max'] * 1e3:.1f} ms  "
            f"delta {_fmt(r.get('delta'), '.2f')}  loading {r['loading_cores']:.1f} cores  "
            f"jobs {r['jobs_cores']:.1f} cores")


def _gpu_mem(r):
    smi = [j.get("gpu_mib_smi") for j in r["job"]]
    torch_mib = [j.get("torch_peak_mib") for j in r["job"]]
    parts = []
    if all(v is not None for v in smi) and smi:
        parts.append(f"{max(smi):,.0f}")
    if all(v is not None for v in torch_mib) and torch_mib:
        parts.append(f"torch {max(torch_mib):,.0f}")
    if r.get("server_gpu_mib_smi") is not None:
        parts.append(f"server {r['server_gpu_mib_smi']:,.0f}")
    return " / ".join(parts) or "-"


def markdown(results):
    runs = results["runs"]
    meta = results["meta"]
    lines = [
        "| MPS | model | data | N | batch | img/s, all jobs | img/s per job | step ms (max) | "
        "delta | data wait (max) | loading CPU (cores) | jobs' CPU (cores) | "
        "GPU MiB per job (max) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    order = {s: i for i, s in enumerate(SOURCES)}
    for r in sorted(runs, key=lambda r: (r["model"], r["mps"], order.get(r["source"], 9),
                                          r["jobs"])):
        batch = ",".join(str(b) for b in dict.fromkeys(r["batch_sizes"]))
        w = r.get("dl_workers")
        data = r["source"] + (f" ({w} worker{'s' if w != 1 else ''}/job)" if w else "")
        if r.get("error"):
            lines.append(f"| {r['mps']} | {r['model']} | {data} | {r['jobs']} | {batch} | "
                         f"error: {r['error'][:80]} | | | | | | | |")
            continue
        per = " / ".join(_fmt(j["img_s"]) for j in r["job"])
        mps = r["mps"] + (" (active)" if r.get("mps_active") else "")
        short = "*" if any(j.get("short_window") for j in r["job"]) else ""
        wait = max(j["wait_frac"] for j in r["job"])
        lines.append(
            f"| {mps} | {r['model']} | {data} | {r['jobs']} | {batch} | {_fmt(r['img_s'])} | {per} | "
            f"{r['step_s_max'] * 1e3:.1f}{short} | {_fmt(r.get('delta'), '.2f')} | {100 * wait:.0f}% | "
            f"{r['loading_cores']:.1f} | {r['jobs_cores']:.1f} | {_gpu_mem(r)} |")
    head = [f"Co-location: {meta.get('gpu') or meta.get('device')}, {meta.get('cores')} cores, "
            f"torch {meta.get('torch')}, input {meta.get('size')}px, "
            f"{'bf16 autocast' if meta.get('amp_bf16') else 'float32'}, dataset "
            f"{meta.get('images')} JPEGs, warm-up {meta.get('warmup_s')} s + "
            f"{meta.get('measure_s')} s measured per row; {meta.get('date')}.",
            f"Command: `{meta.get('command')}`.",
            "MPS: " + "; ".join(f"{k}: {v}" for k, v in results.get("mps", {}).items()) + ".",
            "delta = sum of the jobs' step times alone (N=1, same MPS/model/data/batch) / "
            "the slowest co-located step time (Tabrizian 2020, eq. 4.1). Loading CPU: the "
            "DataLoader workers of all jobs, or the batchcast-server process (hosted: the server's "
            "threads in job 0). Data wait: the "
            "share of a job's step time spent waiting for its next batch. GPU memory: "
            "nvidia-smi per process / torch's peak reserved memory / the server (nvidia-smi; batchcast rows). "
            "* = a step longer than the timed window (one step timed).", ""]
    return "\n".join(head + lines) + "\n"


def summary(results):
    """Lines comparing batchcast with the per-job DataLoaders (and the synthetic bound)."""
    runs = [r for r in results["runs"] if not r.get("error")]
    by = {(r["mps"], r["model"], r["jobs"], r["source"], tuple(r["batch_sizes"])): r for r in runs}
    out = []
    for (mps, model, n, source, batches), bc in sorted(by.items()):
        if source not in SERVED:
            continue
        dl = by.get((mps, model, n, "dataloader", batches))
        syn = by.get((mps, model, n, "synthetic", batches))
        text = f"MPS {mps}, {model}, {n} job(s): {source} {bc['img_s']:,.0f} img/s"
        if dl:
            text += (f" = {bc['img_s'] / dl['img_s']:.1f}x the per-job DataLoaders' "
                     f"{dl['img_s']:,.0f}, with {bc['loading_cores']:.1f} loading cores instead "
                     f"of {dl['loading_cores']:.1f}")
        if syn:
            text += f"; {100 * bc['img_s'] / syn['img_s']:.0f}% of the data-unbound rate"
        out.append(text)
    return out


def plots(results, out_dir):
    """PNG plots; returns the files written, or a note saying why there are none."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ("matplotlib not found: no plots (make them where it is installed: "
                "benchmarks/colocate.py --plot-only colocate.json --out DIR)")
    runs = [r for r in results["runs"] if not r.get("error")]
    models = list(dict.fromkeys(r["model"] for r in runs))
    if not models:
        return "nothing measured: no plots"
    colors = {"synthetic": "tab:gray", "dataloader": "tab:red", "batchcast": "tab:blue",
              "hosted": "tab:green"}
    written = []
    for key, ylabel, fname in (("img_s", "images/s, all jobs", "colocate_throughput.png"),
                               ("delta", "delta (co-location speed-up)", "colocate_delta.png")):
        fig, axes = plt.subplots(1, len(models), figsize=(5 * len(models), 4), squeeze=False)
        for ax, model in zip(axes[0], models):
            for source in SOURCES:
                for mps, style in (("off", "-"), ("on", "--")):
                    pts = sorted((r["jobs"], r[key]) for r in runs
                                 if r["model"] == model and r["source"] == source
                                 and r["mps"] == mps and r.get(key) is not None
                                 and len(set(r["batch_sizes"])) == 1
                                 and r["batch_sizes"][0] == runs_batch(runs, model))
                    if pts:
                        ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o",
                                color=colors.get(source), label=f"{source}, MPS {mps}")
            if key == "delta":
                ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
            ax.set_xscale("log", base=2)
            ax.set_xticks(sorted({r["jobs"] for r in runs}))
            ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
            ax.set_xlabel("co-located jobs (N)")
            ax.set_ylabel(ylabel)
            ax.set_title(f"{model}, batch {runs_batch(runs, model)}")
            ax.grid(True, alpha=0.3)
            if ax.get_legend_handles_labels()[0]:  # none: e.g. no delta without N=1 rows
                ax.legend(fontsize=8)
        fig.suptitle(f"{results['meta'].get('gpu') or results['meta'].get('device')}: "
                     + ("throughput" if key == "img_s" else "delta = sum alone / max co-located"))
        fig.tight_layout()
        path = os.path.join(out_dir, fname)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


# ---- the demo (scripts/demo.sh) ------------------------------------------------

DEMO_LABELS = {"dataloader": "A: a torch DataLoader per job", "batchcast": "B: one batchcast server"}


def demo_intro(args):
    return "\n".join([
        f"== 2 training jobs on the CPU (a small CNN, {args.size} px, batch sizes 32 and 48) "
        f"read {args.data} ({args.images} JPEGs)",
        "   A: each job has its own torch DataLoader, 1 worker each (2 loading processes)",
        "   B: both read one batchcast server with 2 worker threads (each image decoded once, "
        "for both)",
        f"   each measured for {args.measure:g} s after {args.warmup:g} s of warm-up; neither "
        "caches decoded images (both decode every image every epoch, from the page cache)"])


def demo_row(run):
    label = DEMO_LABELS.get(run["source"], run["source"])
    if run.get("error"):
        return f"   {label}: error: {run['error']}"
    return f"   measured {label}"


def demo_report(results, out_dir):
    runs = {r["source"]: r for r in results["runs"]}
    lines = ["", f"   {'':32}{'images/s':>9}{'job 0':>8}{'job 1':>8}{'loading CPU':>14}"
             f"{'all CPU':>12}"]
    for source in ("dataloader", "batchcast"):
        r = runs.get(source)
        if r is None or r.get("error"):
            lines.append(f"   {DEMO_LABELS[source]:32} error: {r and r['error']}")
            continue
        per = [j["img_s"] for j in r["job"]]
        lines.append(f"   {DEMO_LABELS[source]:32}{r['img_s']:>9,.0f}{per[0]:>8,.0f}{per[1]:>8,.0f}"
                     f"{r['loading_cores']:>8.2f} cores{r['loading_cores'] + r['jobs_cores']:>6.2f}"
                     " cores")
    dl, bc = runs.get("dataloader"), runs.get("batchcast")
    if dl and bc and not dl.get("error") and not bc.get("error"):
        per_image = (dl["loading_cores"] / dl["img_s"]) / max(1e-12, bc["loading_cores"] / bc["img_s"])
        lines += ["", f"== speed-up: {bc['img_s'] / dl['img_s']:.1f}x the images/s, with "
                  f"{per_image:.1f}x less loading CPU per image",
                  f"   (the server decoded {bc.get('server_samples_s', 0):,.0f} images/s, each "
                  f"for both jobs, and waited for the jobs {100 * bc.get('server_blocked_frac', 0):.0f}% "
                  "of the time: in B the training, not the loading, sets the pace)"]
        lines += ["", "== server stats while running (batchcast-server stat NAME, during B's "
                  "warm-up):"] + ["   " + t for t in bc.get("server_stat_text", "").splitlines()]
    lines += ["", f"   logs: {os.path.join(out_dir, 'colocate-server.log')} (server), "
              f"{os.path.join(out_dir, 'colocate-jobs.log')} (jobs); numbers: "
              f"{os.path.join(out_dir, 'colocate.json')}"]
    return "\n".join(lines)


def runs_batch(runs, model):
    """The batch size plotted for a model: the one of its first run."""
    return next(r["batch_sizes"][0] for r in runs if r["model"] == model)


def write_outputs(results, out_dir):
    compute_deltas(results["runs"])
    md = os.path.join(out_dir, "colocate.md")
    with open(md, "w") as f:
        f.write(markdown(results))
    made = plots(results, out_dir)
    print(f"table: {md}", flush=True)
    if isinstance(made, str):
        print(made, flush=True)
    else:
        print("plots: " + ", ".join(made), flush=True)
    for line in summary(results):
        print(line, flush=True)


def merge(paths):
    """Runs of several JSON files (later files replace the same rows)."""
    merged = None
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        if merged is None:
            merged = data
            continue
        merged["mps"].update(data.get("mps", {}))
        key = lambda r: (r["mps"], r["model"], r["source"], r["jobs"], tuple(r["batch_sizes"]))  # noqa: E731
        rows = {key(r): r for r in merged["runs"]}
        rows.update({key(r): r for r in data["runs"]})
        merged["runs"] = list(rows.values())
    return merged


# ---- the command line ---------------------------------------------------------


def _csv(kind):
    return lambda text: [kind(x) for x in text.split(",") if x]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="colocate-out", help="output folder")
    p.add_argument("--jobs", type=_csv(int), default=[1, 2, 4, 8], help="N values, e.g. 1,2,4,8")
    p.add_argument("--models", type=_csv(str), default=list(DEFAULT_MODELS))
    p.add_argument("--sources", type=_csv(str), default=list(DEFAULT_SOURCES),
                   help=f"of {','.join(SOURCES)} (default {','.join(DEFAULT_SOURCES)})")
    p.add_argument("--mps", type=_csv(str), default=["off", "on"], help="off,on")
    p.add_argument("--batch-size", action="append", metavar="[MODEL=]B[,B...]",
                   help=f"per model (default {DEFAULT_BATCH}); a list is dealt to the jobs")
    p.add_argument("--device", default="cuda:0", help="cuda:N or cpu")
    p.add_argument("--size", type=int, default=224, help="input size")
    p.add_argument("--warmup", type=float, default=1.5, help="seconds before the timed window")
    p.add_argument("--measure", type=float, default=2.5, help="seconds of the timed window")
    p.add_argument("--setup-steps", type=int, default=2, help="untimed steps at set-up")
    p.add_argument("--data", help="ImageFolder (default: made with tools/make_dataset.py)")
    p.add_argument("--images", type=int, default=10000, help="images of the made dataset")
    p.add_argument("--photos", help="make_dataset.py --photos DIR (default ../shared/data/photos "
                   "where it exists)")
    p.add_argument("--dl-workers", type=int, help="DataLoader workers per job "
                   "(default max(1, (cores - N) // N))")
    p.add_argument("--server-workers", type=int, default=0, help="server --workers (0 = its default)")
    p.add_argument("--server-batch", type=int, default=256)
    p.add_argument("--server-window", type=int, default=8)
    p.add_argument("--server-bin", help="batchcast-server (default: the build's tools/)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per job (CPU device)")
    p.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--budget", type=float, default=0,
                   help="seconds since the start (dataset making included): start no phase that "
                   "would end later (0 = no limit)")
    p.add_argument("--quick", action="store_true",
                   help="N in 1,4; resnet18; warm-up 1 s, 2 s measured (~1.5 min on the GPU host)")
    p.add_argument("--smoke", action="store_true",
                   help="CPU smoke run: tiny_cnn, 32 px, N in 1,2, 64 images, MPS off (seconds)")
    p.add_argument("--demo", action="store_true",
                   help="scripts/demo.sh: 2 jobs of tiny_cnn on the CPU (batch 32 and 48), "
                   "per-job DataLoaders (1 worker each) vs one server (2 workers), side by side")
    p.add_argument("--plot-only", nargs="+", metavar="JSON",
                   help="only write the table and plots of these result files (merged)")
    p.add_argument("--job", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.jobs, args.models, args.warmup, args.measure = [1, 4], ["resnet18"], 1.0, 2.0
    if args.smoke:
        args.device, args.models, args.size, args.jobs, args.mps = "cpu", ["tiny_cnn"], 32, [1, 2], ["off"]
        args.images, args.warmup, args.measure, args.setup_steps = 64, 0.3, 0.8, 1
        args.server_batch, args.server_window = 16, 4
        args.batch_size = args.batch_size or ["8"]
        args.dl_workers = 1 if args.dl_workers is None else args.dl_workers
        args.server_workers = args.server_workers or 1
    if args.demo:
        args.device, args.models, args.size, args.jobs, args.mps = "cpu", ["tiny_cnn"], 64, [2], ["off"]
        args.sources, args.batch_size = ["dataloader", "batchcast"], ["32,48"]
        args.dl_workers, args.server_workers = 1, 2
        args.server_batch, args.server_window, args.setup_steps = 64, 8, 2
        args.warmup = 3.0 if args.warmup == 1.5 else args.warmup
        args.measure = 10.0 if args.measure == 2.5 else args.measure
    for s in args.sources:
        if s not in SOURCES:
            p.error(f"unknown source {s!r} (choose from {', '.join(SOURCES)})")
    for m in args.mps:
        if m not in ("off", "on"):
            p.error(f"--mps takes off,on; got {m!r}")
    args.batch_sizes = parse_batch_sizes(args.batch_size, args.models)
    args.amp = args.device.startswith("cuda")
    args.jobs = sorted(set(args.jobs))
    return args


def prepare(args):
    """Dataset and server binary."""
    needs_data = any(s in args.sources for s in ("dataloader",) + SERVED)
    if needs_data and not args.data:
        args.data = os.path.join("/tmp", f"batchcast-colocate-{args.images}")
    if needs_data and not os.path.isdir(args.data):
        photos = args.photos or os.path.join(REPO, "..", "shared", "data", "photos")
        classes = max(1, min(100, args.images // 32))
        cmd = [sys.executable, os.path.join(REPO, "tools", "make_dataset.py"), args.data,
               "--classes", str(classes), "--per-class", str(max(1, args.images // classes)),
               "--quiet", "--workers", str(args.cores)]
        if os.path.isdir(photos):
            cmd += ["--photos", photos]
        t = time.monotonic()
        subprocess.run(cmd, check=True)
        print(f"dataset: {args.data} ({args.images} JPEGs) made in {time.monotonic() - t:.0f} s",
              flush=True)
    if needs_data:
        args.images = sum(len(files) for _, _, files in os.walk(args.data))
    if any(s in args.sources for s in SERVED) and not args.server_bin:  # hosted: for `stat`
        build = add_build_to_path()
        cands = [os.path.join(build, "tools", "batchcast-server")] if build else []
        cands.append(shutil.which("batchcast-server"))
        args.server_bin = next((c for c in cands if c and os.access(c, os.X_OK)), None)
        if not args.server_bin:
            sys.exit("batchcast-server not found: build it (scripts/build.sh) and set "
                     "BATCHCAST_BUILD_DIR, or pass --server-bin")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if "--job" in argv:
        add_build_to_path()
        host = json.loads(argv[argv.index("--host") + 1]) if "--host" in argv else None
        return job_main(host)
    args = parse_args(argv)
    add_build_to_path()
    if args.plot_only:
        results = merge(args.plot_only)
        out = args.out if args.out != "colocate-out" else os.path.dirname(args.plot_only[0]) or "."
        os.makedirs(out, exist_ok=True)
        if len(args.plot_only) > 1:
            with open(os.path.join(out, "colocate.json"), "w") as f:
                json.dump(results, f, indent=1)
        write_outputs(results, out)
        return 0
    prepare(args)
    bench = Bench(args)
    phases = len(args.mps) * len(args.jobs) * len(args.models) * len(args.sources)
    if args.demo:
        print(demo_intro(args), flush=True)
    else:
        print(f"co-location benchmark: {phases} phases of {args.warmup}+{args.measure} s "
              f"(about {phases * bench.phase_seconds() / 60:.1f} min); output in {args.out}",
              flush=True)
    try:
        bench.run()
    except KeyboardInterrupt:
        print("interrupted: writing what was measured", flush=True)
        bench.save()
    if args.demo:
        print(demo_report(bench.results, args.out), flush=True)
        return 0
    write_outputs(bench.results, args.out)
    print(f"done in {bench.elapsed():.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
