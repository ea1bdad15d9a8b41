"""batchcast-launch: supervising the jobs until they all ended.

Ctrl-C (or SIGTERM) stops every job: SIGINT to its process group, SIGTERM
after the grace period (or at a second Ctrl-C), SIGKILL after --kill-after
(or at a third); --fail-fast does the same when a job fails. The launcher's
exit status is 0 when every job succeeded, else the first failed job's
status, or 128+signal when a signal stopped it (see batchcast.launch).
"""
from __future__ import annotations

import shlex
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from batchcast._launch_jobs import PREFIX, Console, Job, Rates, status_text


class Stopper:
    """Ctrl-C / SIGTERM / fail-fast: SIGINT to the jobs, then SIGTERM, then SIGKILL."""

    STAGES = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)

    def __init__(self, jobs: Sequence[Job], console: Console, grace: float, kill_after: float):
        self._jobs, self._console = jobs, console
        self._waits = (grace, kill_after)
        self.stage = 0  # signals sent so far
        self.deadline: Optional[float] = None
        self.cause: Optional[int] = None  # the signal the launcher got, if any
        self._requests = 0

    def request(self, signum: Optional[int] = None) -> None:
        """From a signal handler (or fail-fast): go to the next stage at the next tick."""
        if signum is not None and self.cause is None:
            self.cause = signum
        self._requests += 1

    def tick(self, now: float) -> None:
        want = min(len(self.STAGES), max(self._requests, self.stage))
        if self.deadline is not None and now >= self.deadline:
            want = max(want, self.stage + 1)
        while self.stage < min(want, len(self.STAGES)):
            sig = self.STAGES[self.stage]
            alive = [j for j in self._jobs if j.poll() is None]
            if alive:
                self._console.line(f"{PREFIX} sending {signal.Signals(sig).name} to job(s) "
                                   f"{', '.join(str(j.index) for j in alive)}"
                                   + (" (Ctrl-C again to hurry)" if self.stage == 0 else ""),
                                   sys.stderr)
            for j in alive:
                j.signal(sig)
            self.stage += 1
            self._requests = max(self._requests, self.stage)
            self.deadline = (now + self._waits[self.stage - 1]
                             if self.stage < len(self.STAGES) else None)


@dataclass(frozen=True)
class Supervision:
    """The launcher's settings for its jobs (from its command line)."""

    grace: float  # after SIGINT, seconds before SIGTERM
    kill_after: float  # after SIGTERM, seconds before SIGKILL
    fail_fast: bool  # a failed job stops the others
    status_interval: Optional[float]  # None: 1 s on a terminal, 30 s otherwise; 0: none
    mps_on: bool  # for the status line


def run_jobs(argvs: Sequence[List[str]], env: Dict[str, str], server: Any, console: Console,
             how: Supervision) -> int:
    """Starts job k as `argvs[k]` (BATCHCAST_JOB=k in `env`) and supervises
    them until all ended, with Ctrl-C and SIGTERM stopping them; returns the
    launcher's exit status."""
    jobs: List[Job] = []
    stopper = Stopper(jobs, console, how.grace, how.kill_after)
    handlers = {s: signal.signal(s, lambda signum, _frame: stopper.request(signum))
                for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for k, argv in enumerate(argvs):
            console.line(f"{PREFIX} job {k}: {shlex.join(argv)}", sys.stderr)
            try:
                jobs.append(Job(k, argv, {**env, "BATCHCAST_JOB": str(k)}, console))
            except OSError as e:
                console.line(f"{PREFIX} job {k} did not start: {e}", sys.stderr)
                stopper.request()
                code = supervise(jobs, stopper, server, console, how)
                return code if stopper.cause is not None else 127  # as a shell says
        return supervise(jobs, stopper, server, console, how)
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)


def supervise(jobs: List[Job], stopper: Stopper, server: Any, console: Console,
              how: Supervision) -> int:
    """Until every job ended: reports each end, stops the others on a
    signal (or a failure, with fail-fast), shows the status line; then the
    summary. Returns the launcher's exit status."""
    interval = how.status_interval
    if interval is None:
        interval = 1.0 if console.tty else 30.0
    rates = Rates(jobs)
    start = time.monotonic()
    next_status = start + min(interval, 1.0) if interval > 0 else float("inf")
    reported: set = set()
    failed: List[Job] = []
    server_error_shown = False
    while True:
        now = time.monotonic()
        for j in jobs:
            code = j.poll()
            if code is not None and j.index not in reported:
                reported.add(j.index)
                j.join_output(1.0)
                status = j.exit_status
                console.line(f"{PREFIX} job {j.index} exited with status {status} after "
                             f"{(j.ended or now) - j.started:.1f} s", sys.stderr)
                if status != 0 and stopper.stage == 0:  # not one that we stopped
                    failed.append(j)
                    if how.fail_fast:
                        stopper.request()
        if all(j.index in reported for j in jobs):
            break
        stopper.tick(now)
        if not server_error_shown:
            try:
                server.wait(0)
            except Exception as e:  # noqa: BLE001 - the producer stopped; jobs will see it
                console.line(f"{PREFIX} the server stopped: {e}", sys.stderr)
                server_error_shown = True
        if now >= next_status:
            next_status = now + interval
            try:
                server_rate, job_rates, job_waits = rates.update(server.stats(), now)
            except Exception:  # noqa: BLE001 - a stopped server has no stats
                server_rate, job_rates, job_waits = None, {}, {}
            console.status(status_text(now - start, server_rate, job_rates, jobs, how.mps_on,
                                       job_waits))
        time.sleep(0.05)
    console.clear()
    for j in jobs:
        j.join_output(5.0)
    ok = sum(1 for j in jobs if j.exit_status == 0)
    stopped = [j for j in jobs if j.exit_status != 0 and j not in failed]
    console.line(f"{PREFIX} {ok} of {len(jobs)} job(s) succeeded"
                 + "".join(f"; {what}: " + ", ".join(f"job {j.index} ({j.exit_status})" for j in js)
                           for what, js in (("failed", failed), ("stopped", stopped)) if js),
                 sys.stderr)
    if stopper.cause is not None:
        return 128 + stopper.cause
    if failed:
        return failed[0].exit_status or 1
    return 0 if jobs else 1
