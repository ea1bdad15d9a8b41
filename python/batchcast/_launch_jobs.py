"""batchcast-launch: the jobs, their output and the status line.

Each job runs in its own process group with an environment of its own
(job_environment); its stdout and stderr are streamed line by line with a
``[job k]`` prefix through one Console, which keeps the status line (the
server's rate, each job's and each job's wait for data, from the server's
stats: Rates, status_text) at the bottom of a terminal.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from typing import IO, Any, Dict, List, Mapping, Optional, Sequence, Tuple

from batchcast import _core, _proc

PREFIX = "[launch]"


class Console:
    """Serializes the lines of all jobs and the launcher, and keeps the status line
    at the bottom of the terminal (plain lines when the status stream is no
    terminal). Thread-safe."""

    def __init__(self, status_stream: IO[str] = sys.stderr) -> None:
        self._lock = threading.Lock()
        self._stream = status_stream
        self._tty = status_stream.isatty()
        self._shown = ""

    @property
    def tty(self) -> bool:
        return self._tty

    def line(self, text: str, stream: Optional[IO[str]] = None) -> None:
        stream = stream or sys.stdout
        with self._lock:
            covers = self._shown and stream.isatty()
            if covers:
                self._stream.write("\r\x1b[K")
                self._stream.flush()
            stream.write(text + "\n")
            stream.flush()
            if covers:
                self._stream.write(self._shown)
                self._stream.flush()

    def status(self, text: str) -> None:
        with self._lock:
            if self._tty:
                width = shutil.get_terminal_size((120, 20)).columns
                self._shown = text[: max(10, width - 1)]
                self._stream.write("\r\x1b[K" + self._shown)
            else:
                self._stream.write(text + "\n")
            self._stream.flush()

    def clear(self) -> None:
        with self._lock:
            if self._shown:
                self._stream.write("\r\x1b[K")
                self._stream.flush()
                self._shown = ""


def job_environment(environ: Mapping[str, str],
                    console: Optional[Console] = None) -> Dict[str, str]:
    """`environ` without the variables that make a process a rank of a launcher's
    job: the jobs are independent consumers (each the whole stream), never one
    consumer group (docs/semantics.md, "Groups, several GPUs, several nodes")."""
    rank_variables = set(_core.launcher_rank_variables())
    # (BATCHCAST_GROUP alone, without a launcher's rank, chooses nothing: not worth a line)
    removed = sorted(k for k in environ if k in rank_variables and k != "BATCHCAST_GROUP")
    if removed and console is not None:
        console.line(f"{PREFIX} the jobs do not inherit this process's launcher rank "
                     f"({', '.join(removed)}): each job reads the whole stream", sys.stderr)
    return {k: v for k, v in environ.items() if k not in rank_variables}


class Job:
    """One training command: its process (own process group) and output pumps."""

    def __init__(self, index: int, argv: List[str], env: Dict[str, str], console: Console) -> None:
        self.index = index
        self.argv = argv
        self.started = time.monotonic()
        self.ended: Optional[float] = None
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, start_new_session=True)
        prefix = f"[job {index}] "
        self._pumps = [
            threading.Thread(target=_pump, args=(pipe, prefix, console, stream), daemon=True)
            for pipe, stream in ((self.proc.stdout, sys.stdout), (self.proc.stderr, sys.stderr))
        ]
        for t in self._pumps:
            t.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> Optional[int]:
        code = self.proc.poll()
        if code is not None and self.ended is None:
            self.ended = time.monotonic()
        return code

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def join_output(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for t in self._pumps:
            t.join(max(0.0, deadline - time.monotonic()))

    @property
    def exit_status(self) -> Optional[int]:
        """The shell's view: the exit code, or 128+N when killed by signal N."""
        code = self.proc.returncode
        return None if code is None else (128 - code if code < 0 else code)


def _pump(pipe: IO[bytes], prefix: str, console: Console, stream: IO[str]) -> None:
    with pipe:
        for raw in iter(pipe.readline, b""):
            console.line(prefix + raw.decode("utf-8", "replace").rstrip("\r\n"), stream)


# ---- the status line ------------------------------------------------------


class Rates:
    """Samples/s of the server and of each job, and each job's wait for data,
    from successive server stats. A consumer belongs to the job whose process
    it is or descends from."""

    def __init__(self, jobs: Sequence[Job]) -> None:
        self._jobs = {j.pid: j.index for j in jobs}
        self._owner: Dict[int, Optional[int]] = {}
        self._last: Optional[Tuple[float, int, Dict[int, Tuple[int, int, float]]]] = None

    def _job_of(self, pid: int) -> Optional[int]:
        if pid not in self._owner:
            root = _proc.owner_of(pid, self._jobs)
            self._owner[pid] = None if root is None else self._jobs[root]
        return self._owner[pid]

    def update(self, stats: Dict[str, Any],
               now: float) -> Tuple[Optional[float], Dict[int, float], Dict[int, float]]:
        """(server samples/s, {job: samples/s}, {job: wait}) since the previous
        update (None, {}, {} at first). A job's wait is the share of the
        interval its consumers waited for data, the server's per-consumer
        ``wait_s`` (docs/stats.md), averaged over them: near 1, the job is
        input-bound."""
        published = int(stats.get("samples_published", 0))
        consumers = {int(c["id"]): (int(c.get("pid", 0)), int(c.get("samples", 0)),
                                    float(c.get("wait_s", 0.0)))
                     for c in stats.get("consumers", []) if c.get("attached", True)}
        last, self._last = self._last, (now, published, consumers)
        if last is None or now <= last[0]:
            return None, {}, {}
        dt = now - last[0]
        rates: Dict[int, float] = {}
        waits: Dict[int, List[float]] = {}
        for cid, (pid, samples, wait_s) in consumers.items():
            job = self._job_of(pid)
            if job is not None and cid in last[2]:
                _, last_samples, last_wait = last[2][cid]
                rates[job] = rates.get(job, 0.0) + (samples - last_samples) / dt
                waits.setdefault(job, []).append(min(1.0, max(0.0, (wait_s - last_wait) / dt)))
        return ((published - last[1]) / dt, rates,
                {job: sum(w) / len(w) for job, w in waits.items()})


def status_text(elapsed: float, server_rate: Optional[float], job_rates: Dict[int, float],
                jobs: Sequence[Job], mps_on: bool,
                job_waits: Optional[Dict[int, float]] = None) -> str:
    """The status line: the server's rate, and per job its rate and the share
    of the interval it waited for data (``wait``)."""
    m, s = divmod(int(elapsed), 60)
    parts = []
    waits = job_waits or {}
    for j in jobs:
        if j.poll() is not None:
            parts.append(f"{j.index} exit {j.exit_status}")
        elif j.index in job_rates:
            wait = f" wait {100 * waits[j.index]:.0f}%" if j.index in waits else ""
            parts.append(f"{j.index} {job_rates[j.index]:,.0f}{wait}")
        else:
            parts.append(f"{j.index} -")
    rate = "-" if server_rate is None else f"{server_rate:,.0f}"
    return (f"{PREFIX} {m}:{s:02d}  server {rate} samples/s  jobs: " + " | ".join(parts) +
            f"  MPS {'on' if mps_on else 'off'}")
