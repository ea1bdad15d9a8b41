"""NVIDIA MPS (Multi-Process Service) for co-located jobs on one GPU.

Without MPS, the CUDA contexts of several processes on one GPU are
time-sliced: one process' kernels run at a time. Under MPS their kernels
run concurrently, which helps jobs that each leave the GPU partly idle
(small models, small batches); jobs that each fill the GPU gain little.

    mps = Mps.start("auto")        # or "on" (failure is an error) / "off"
    env = {**os.environ, **mps.env} # what processes started afterwards need
    ...                             # start the GPU processes with env
    mps.stop()                      # quits the daemon if this process started it

The daemon is started (``nvidia-cuda-mps-control -d``) with its pipe and
log directories in a private temporary folder, so it serves only the
processes given ``mps.env``; a daemon that already runs where
CUDA_MPS_PIPE_DIRECTORY points (or at the default /tmp/nvidia-mps) is used
and left running. ``Mps.start("off")`` changes nothing where no daemon
runs; where one does, it points CUDA_MPS_PIPE_DIRECTORY at an empty folder,
so that the processes run without MPS. A CUDA context created before the
daemon started (in this process, say) does not use it: start MPS before
any CUDA work. Whether MPS can be started depends on the node: the
control binary must be there, the GPU's compute mode must allow it, and no
other user's MPS server may hold the GPU.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from typing import Dict, List, Optional

CONTROL = "nvidia-cuda-mps-control"
_DEFAULT_PIPE_DIR = "/tmp/nvidia-mps"


def control_binary() -> Optional[str]:
    """nvidia-cuda-mps-control: on PATH, else where drivers and containers put it."""
    found = shutil.which(CONTROL)
    for folder in ("/usr/bin", "/usr/local/nvidia/bin", "/usr/local/cuda/bin"):
        path = os.path.join(folder, CONTROL)
        if found is None and os.access(path, os.X_OK):
            found = path
    return found


def _control(command: str, env: Dict[str, str], timeout: float = 5.0) -> Optional[str]:
    """Sends one command to the control daemon; its answer, or None when none answers."""
    binary = control_binary()
    pipe_dir = env.get("CUDA_MPS_PIPE_DIRECTORY", _DEFAULT_PIPE_DIR)
    # The daemon listens on the named pipe "control" in its pipe directory;
    # without it there is nobody to ask (and the client's exit status is not
    # documented to say so).
    if binary is None or not os.path.exists(os.path.join(pipe_dir, "control")):
        return None
    try:
        r = subprocess.run([binary], input=command + "\n", env={**os.environ, **env},
                           capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout if r.returncode == 0 else None


def _gpu_present() -> bool:
    return os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvidiactl")


class Mps:
    """The MPS state for processes started with ``env`` (see the module doc).

    Attributes:
        active: True when processes given ``env`` run under MPS.
        started: True when this object started the daemon (stop() quits it).
        env: CUDA_MPS_* variables to give the GPU processes.
        note: one line for people: "on (started, pipes in DIR)", "off (...)", ...
    """

    def __init__(self, active: bool, started: bool, env: Dict[str, str], note: str,
                 folder: Optional[str] = None) -> None:
        self.active = active
        self.started = started
        self.env = env
        self.note = note
        self._folder = folder

    @classmethod
    def start(cls, mode: str = "auto") -> "Mps":
        """mode "auto": MPS where it can be started, else off (the note says why);
        "on": the same, but a failure raises RuntimeError; "off": without MPS."""
        if mode not in ("auto", "on", "off"):
            raise ValueError(f"MPS mode must be auto, on or off, got {mode!r}")
        existing = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", _DEFAULT_PIPE_DIR)
        running = _control("get_server_list", {"CUDA_MPS_PIPE_DIRECTORY": existing}) is not None
        if mode == "off":
            if not running:
                return cls(False, False, {}, "off")
            # Point the processes at an empty folder: no daemon there, no MPS.
            folder = tempfile.mkdtemp(prefix="batchcast-nomps-")
            return cls(False, False, {"CUDA_MPS_PIPE_DIRECTORY": folder},
                       f"off (a daemon runs with pipes in {existing}; not used)", folder)
        if running:
            env = {"CUDA_MPS_PIPE_DIRECTORY": existing}
            return cls(True, False, env, f"on (a daemon already runs, pipes in {existing})")
        reason = cls._cannot_start()
        if reason is None:
            mps, reason = cls._start_daemon()
            if mps is not None:
                return mps
        if mode == "on":
            raise RuntimeError(f"MPS could not be started: {reason}")
        return cls(False, False, {}, f"off ({reason})")

    @staticmethod
    def _cannot_start() -> Optional[str]:
        if control_binary() is None:
            return f"{CONTROL} not found"
        if not _gpu_present():
            return "no NVIDIA GPU"
        return None

    @classmethod
    def _start_daemon(cls):
        folder = tempfile.mkdtemp(prefix="batchcast-mps-")
        env = {"CUDA_MPS_PIPE_DIRECTORY": os.path.join(folder, "pipe"),
               "CUDA_MPS_LOG_DIRECTORY": os.path.join(folder, "log")}
        for d in env.values():
            os.makedirs(d)
        try:
            r = subprocess.run([control_binary(), "-d"], env={**os.environ, **env},
                               capture_output=True, text=True, timeout=10)
            failed = r.returncode != 0 and (r.stderr.strip() or f"exit status {r.returncode}")
        except (OSError, subprocess.TimeoutExpired) as e:
            failed = str(e)
        deadline = time.monotonic() + 5
        while not failed and _control("get_server_list", env) is None:
            if time.monotonic() > deadline:
                failed = "the daemon does not answer" + _log_tail(env["CUDA_MPS_LOG_DIRECTORY"])
            time.sleep(0.1)
        if failed:
            _control("quit", env)
            shutil.rmtree(folder, ignore_errors=True)
            return None, f"{CONTROL} -d failed: {failed}"
        return cls(True, True, env, f"on (started, pipes in {env['CUDA_MPS_PIPE_DIRECTORY']})",
                   folder), None

    def server_pids(self) -> List[int]:
        """PIDs of the MPS servers running for the clients (one once a client connected)."""
        if not self.active:
            return []
        out = _control("get_server_list", self.env)
        return [int(w) for w in (out or "").split() if w.isdigit()]

    def stop(self) -> None:
        """Quits the daemon if this object started it (after its clients ended); idempotent."""
        if self.started:
            _control("quit", self.env, timeout=15)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and _control("get_server_list", self.env) is not None:
                time.sleep(0.1)
            self.started = False
            self.active = False
        if self._folder:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None


def _log_tail(log_dir: str) -> str:
    try:
        with open(os.path.join(log_dir, "control.log")) as f:
            lines = f.read().strip().splitlines()[-3:]
    except OSError:
        return ""
    return ": " + " / ".join(lines) if lines else ""
