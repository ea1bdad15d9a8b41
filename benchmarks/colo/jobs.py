"""The training jobs: one process each, driven by JSON commands on its stdin.

A job is a plain training loop (torchvision model, SGD, bf16 autocast on a
GPU) over the batches of its source (colo/sources.py: open_data). The
parent (colo/measure.py) sets it up for a phase ("setup"), starts every job
of the phase at the same moment ("go"), and gets back the job's step time
over the timed window. JobProc is the parent's side of one job process.
"""
import gc
import json
import os
import queue
import subprocess
import sys
import threading
import time
import traceback
from typing import Any, Dict, List, Optional, Tuple

from colo.sources import open_data

TAG = "COLO "  # job -> parent messages on the job's stdout start with this
ENTRY = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "colocate.py")


def _model(torch: Any, name: str, size: int) -> Any:
    """A torchvision model by name (ViTs at `size`), or tiny_cnn: a 2-layer CNN for CPU runs."""
    import torchvision

    if name == "tiny_cnn":
        nn = torch.nn
        return nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 1000))
    if name.startswith("vit_"):
        return getattr(torchvision.models, name)(image_size=size)
    return getattr(torchvision.models, name)(num_classes=1000)


class Job:
    """The state of one job process: its model, optimizer and data."""

    def __init__(self) -> None:
        import torch

        self.torch = torch
        self.model_key: Optional[Tuple[str, int, str]] = None
        self.model = self.opt = None
        self.data: Optional[Tuple[Any, Any]] = None  # (iterator, close)
        self.cfg: Dict[str, Any] = {}

    @staticmethod
    def send(**msg: Any) -> None:
        sys.stdout.write(TAG + json.dumps(msg) + "\n")
        sys.stdout.flush()

    def _build_model(self, cfg: Dict[str, Any]) -> None:
        torch = self.torch
        key = (cfg["model"], cfg["size"], cfg["device"])
        if key == self.model_key:
            return
        self.model = self.opt = None
        if cfg["device"].startswith("cuda"):
            torch.cuda.empty_cache()
        model = _model(torch, cfg["model"], cfg["size"]).to(cfg["device"])
        if not cfg["model"].startswith("vit_"):
            model = model.to(memory_format=torch.channels_last)
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
        self.model_key = key

    def setup(self, cfg: Dict[str, Any]) -> None:
        torch = self.torch
        self.teardown()
        self.cfg = cfg
        torch.set_num_threads(cfg["threads"])
        if cfg["device"].startswith("cuda"):
            torch.backends.cudnn.benchmark = True
        self._build_model(cfg)
        self.data = open_data(torch, cfg)
        if cfg["device"].startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        for _ in range(cfg["setup_steps"]):  # cudnn autotuning, workers started, first batches
            self._step()
        self.send(ready=True)

    def teardown(self) -> None:
        if self.data is not None:
            self.data[1]()
            self.data = None
            gc.collect()

    def _step(self) -> Tuple[float, float, float]:
        """One training step: (its start, its batch there, its end)."""
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

    def go(self, cmd: Dict[str, Any]) -> None:
        """Trains from cmd["t0"]; times the steps that end within the window
        [t0 + warmup, t0 + warmup + measure] (step time = their span / their count)."""
        ws = cmd["t0"] + cmd["warmup"]
        we = ws + cmd["measure"]
        while time.monotonic() < cmd["t0"]:
            time.sleep(0.001)
        steps: List[Tuple[float, float, float]] = []  # (start, data ready, end)
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

    def drain(self, cmd: Dict[str, Any]) -> None:
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


def job_main(host: Optional[Dict[str, Any]] = None) -> None:
    """The job process. `host`: batchcast.Server keywords (data included) of
    the server this job hosts (source "hosted"), started before anything
    here starts CUDA, as the README's recipe does."""
    hosted = None
    job = Job()
    if host is not None:
        import batchcast

        batchcast.set_log_level("info")
        try:
            hosted = batchcast.Server(host.pop("data"), **host)
        except Exception as e:  # noqa: BLE001 - the parent's hello says why
            job.send(error=f"batchcast.Server: {type(e).__name__}: {e}"[:500])
            return
    torch = job.torch
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


class JobProc:
    """The parent's side of a job process: commands to it, its messages back."""

    def __init__(self, index: int, env: Dict[str, str], log: Any,
                 host: Optional[Dict[str, Any]] = None) -> None:
        self.index = index
        argv = [sys.executable, ENTRY, "--job"]
        if host is not None:  # batchcast.Server keywords of the server it hosts
            argv += ["--host", json.dumps(host)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=log, env=env, text=True, bufsize=1)
        self.pid = self.proc.pid
        self.messages: "queue.Queue[Optional[Dict[str, Any]]]" = queue.Queue()
        self._log = log
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.startswith(TAG):
                self.messages.put(json.loads(line[len(TAG):]))
            else:
                self._log.write(f"[job {self.index}] {line}")
                self._log.flush()
        self.messages.put(None)

    def send(self, **cmd: Any) -> None:
        try:
            self.proc.stdin.write(json.dumps(cmd) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def recv(self, timeout: float) -> Dict[str, Any]:
        try:
            msg = self.messages.get(timeout=timeout)
        except queue.Empty:
            return {"error": f"no answer in {timeout:.0f} s"}
        if msg is None:
            self.messages.put(None)
            return {"error": f"the job process exited ({self.proc.poll()}); see colocate-jobs.log"}
        return msg

    def stop(self) -> None:
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
