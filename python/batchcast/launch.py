"""batchcast.launch: one server on a dataset and N training jobs reading it.

The common case of co-location in one command (also installed as
``batchcast-launch``)::

    python3 -m batchcast.launch /data/imagenet/train --jobs 4 --device cuda:0 \\
        --size 224 --dtype bfloat16 --batch-size 256 \\
        --each lr=0.1,0.2,0.4,0.8 -- python3 train.py --shared {name} --lr {lr}

It starts MPS where it may (``--mps auto``, the default; the first line
says whether MPS is on), then a batchcast server in this process (the
options of ``batchcast-server serve``), then the N commands after ``--``,
each in its own process group. In each command

    {name}       the server's name (what batchcast.Loader takes)
    {endpoint}   its endpoint (ipc://... or tcp://...)
    {rank}       the job's number, 0 .. N-1 (also {job})
    {jobs}       N
    {NAME}       the k-th value of ``--each NAME=V1,V2,...`` for job k
    {a,b,c}      the k-th item for job k: quote it ('{a,b,c}'), or bash and
                 zsh expand it into separate words before the launcher sees it

are replaced (other braces stay as they are); a list has one item per job,
and without --jobs the lists' length sets N. So these two are the same::

    python3 -m batchcast.launch DATA --each lr=0.1,0.2 -- python3 train.py --lr {lr}
    python3 -m batchcast.launch DATA -- python3 train.py --lr '{0.1,0.2}'

Jobs also get the variables BATCHCAST_SERVER (the endpoint), BATCHCAST_JOB
and BATCHCAST_JOBS, and PYTHONUNBUFFERED=1; they do not inherit a torchrun or
SLURM rank this command may run under (LOCAL_RANK, SLURM_LOCALID, ...,
BATCHCAST_GROUP: ``batchcast._core.launcher_rank_variables()``), so that no
job joins the launcher's consumer group by mistake (a job that runs torchrun
itself still makes its own group). Their output is streamed line
by line with a ``[job k]`` prefix (stdout to stdout, stderr to stderr). A
status line shows the server's rate and each job's (samples/s, from the
server's stats of its consumers): refreshed in place on a terminal,
printed as plain lines every ``--status-interval`` seconds otherwise.

It ends when every job has ended, with exit status 0 if all succeeded,
else the status of the first job that failed (128+N for a job killed by
signal N). Ctrl-C (or SIGTERM) stops everything: SIGINT to every job's
process group, SIGTERM after ``--grace`` seconds (or at a second Ctrl-C),
SIGKILL ``--kill-after`` seconds later (or at a third); then the server
stops and MPS is quit if this command started it; the exit status is
128+signal. ``--fail-fast`` stops the other jobs in the same way when one
fails (like torchrun); by default they go on (a hyper-parameter search
outlives one bad setting).

Jobs are independent consumers: each gets the whole stream (every sample
once per its epoch) at its own batch size; the server's window bounds how
far the fastest runs ahead of the slowest (see docs/semantics.md, "Window").
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Dict, IO, List, Mapping, Optional, Sequence, Tuple

from batchcast import _core, _proc
from batchcast._mps import Mps

PREFIX = "[launch]"

# ---- the job commands -----------------------------------------------------

_FIELD = re.compile(r"\{([^{}]*)\}")
_NAMED = ("name", "endpoint", "rank", "job", "jobs")


def list_lengths(command: Sequence[str]) -> List[int]:
    """Lengths of the {a,b,...} lists in `command`."""
    return [len(m.group(1).split(",")) for arg in command for m in _FIELD.finditer(arg)
            if m.group(1) not in _NAMED and "," in m.group(1)]


def parse_each(specs: Sequence[str]) -> Dict[str, List[str]]:
    """{NAME: [values]} of --each NAME=V1,V2,... options. Raises ValueError."""
    out: Dict[str, List[str]] = {}
    for spec in specs:
        name, eq, values = spec.partition("=")
        if not eq or not name.isidentifier() or name in _NAMED:
            raise ValueError(f"--each takes NAME=V1,V2,... with a NAME other than "
                             f"{', '.join(_NAMED)}; got {spec!r}")
        out[name] = values.split(",")
    return out


def expand(command: Sequence[str], job: int, jobs: int, name: str, endpoint: str,
           each: Optional[Dict[str, List[str]]] = None) -> List[str]:
    """The command of job `job` (see the module doc); `each` holds the --each lists.
    Raises ValueError for a list whose length is not `jobs`."""
    def pick(items: List[str], what: str) -> str:
        if len(items) != jobs:
            raise ValueError(f"{what} has {len(items)} items for {jobs} jobs: give one per job")
        return items[job]

    values = {"name": name, "endpoint": endpoint, "rank": str(job), "job": str(job),
              "jobs": str(jobs)}
    for key, items in (each or {}).items():
        values[key] = pick(items, f"--each {key}=")

    def field(m: "re.Match[str]") -> str:
        inner = m.group(1)
        if inner in values:
            return values[inner]
        if "," not in inner:
            return m.group(0)  # not ours: {} or {x} stay as they are
        return pick(inner.split(","), m.group(0))

    return [_FIELD.sub(field, arg) for arg in command]


# ---- server options -------------------------------------------------------


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _option_value(default: str, text: str) -> Any:
    """A command-line value as batchcast.Server takes it. The option table gives
    each option's default as text: numbers (integer or seconds) get int or
    float, "R,G,B" a tuple, other options (names, paths, choices) the text."""
    if "," in default or ("," in text and all(_is_number(t) for t in text.split(","))):
        try:
            return tuple(float(t) for t in text.split(","))
        except ValueError:
            return text  # the server says what it expected
    numeric = default == "" or _is_number(default)
    if numeric and re.fullmatch(r"\d+", text.strip()):
        return int(text)
    if numeric and _is_number(text):
        return float(text)
    return text


def _server_options() -> List[Tuple[str, str, str, str]]:
    """(name, group, help, default) of the server options the launcher passes on."""
    return [o for o in _core.server_options() if o[0] != "data"]


def _add_server_options(parser: argparse.ArgumentParser) -> None:
    groups: Dict[str, Any] = {}
    for name, group, help_text, default in _server_options():
        g = groups.get(group) or groups.setdefault(
            group, parser.add_argument_group(f"server options ({group})"))
        flag = "--" + name.replace("_", "-")
        if default in ("true", "false"):
            g.add_argument(flag, dest=f"server_{name}", action=argparse.BooleanOptionalAction,
                           default=None, help=f"{help_text} (default {default})")
        else:
            shown = f" (default {default})" if default else ""
            g.add_argument(flag, dest=f"server_{name}", metavar=name.upper(), default=None,
                           help=help_text + shown)


def server_kwargs(args: argparse.Namespace) -> Dict[str, Any]:
    """batchcast.Server keyword arguments from the parsed command line."""
    out: Dict[str, Any] = {}
    for name, _group, _help, default in _server_options():
        value = getattr(args, f"server_{name}", None)
        if value is None:
            continue
        out[name] = value if isinstance(value, bool) else _option_value(default, value)
    return out


def parse_args(argv: Sequence[str]) -> Tuple[argparse.Namespace, List[str]]:
    """(options, job command) from the launcher's arguments. Exits with status 2
    (argparse) on a bad command line."""
    argv = list(argv)
    parser = argparse.ArgumentParser(
        prog="python3 -m batchcast.launch",
        usage="%(prog)s [DATA] [--jobs N] [options] -- COMMAND [ARGS...]",
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", nargs="?", metavar="DATA",
                        help="image folder or .tsv list to serve (or --synthetic N)")
    parser.add_argument("-n", "--jobs", type=int, help="jobs to start (default: the lists' length)")
    parser.add_argument("--each", action="append", default=[], metavar="NAME=V1,V2,...",
                        help="job k gets the k-th value as {NAME} (shell-safe lists)")
    parser.add_argument("--mps", choices=("auto", "on", "off"), default="auto",
                        help="start NVIDIA MPS for the jobs: auto (where it may), on (or fail), off")
    parser.add_argument("--status-interval", type=float, default=None, metavar="SECONDS",
                        help="status refresh (default 1 on a terminal, 30 otherwise; 0: none)")
    parser.add_argument("--grace", type=float, default=10.0, metavar="SECONDS",
                        help="after SIGINT, how long jobs may take to stop before SIGTERM (10)")
    parser.add_argument("--kill-after", type=float, default=5.0, metavar="SECONDS",
                        help="after SIGTERM, how long before SIGKILL (5)")
    parser.add_argument("--fail-fast", action="store_true",
                        help="stop the other jobs when one fails")
    parser.add_argument("--log-level", default="warn",
                        help="the server library's log level (trace ... off; default warn)")
    _add_server_options(parser)
    if "--" not in argv:
        if any(a in ("-h", "--help") for a in argv):
            parser.parse_args(argv)
        parser.error("give the job command after '--', e.g. -- python3 train.py --shared {name}")
    cut = argv.index("--")
    args = parser.parse_args(argv[:cut])
    command = argv[cut + 1 :]
    if not command:
        parser.error("the job command after '--' is empty")
    try:
        args.each = parse_each(args.each)
    except ValueError as e:
        parser.error(str(e))
    lengths = set(list_lengths(command)) | {len(v) for v in args.each.values()}
    if args.jobs is None:
        if len(lengths) > 1:
            parser.error(f"the lists (--each, {{a,b,...}}) have different lengths {sorted(lengths)}")
        if not lengths:
            parser.error("give --jobs N (or --each NAME=V1,V2,... lists)")
        args.jobs = lengths.pop()
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    bad = sorted(n for n in lengths if n != args.jobs)
    if bad:
        parser.error(f"a list (--each or {{a,b,...}}) has {bad[0]} items for {args.jobs} jobs")
    if args.data is None and getattr(args, "server_synthetic", None) is None:
        parser.error("give DATA (an image folder or .tsv list) or --synthetic N")
    if args.server_name is None and args.server_endpoint is None:
        args.server_name = f"batchcast-launch-{os.getpid()}"
    return args, command


# ---- output ---------------------------------------------------------------


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
    """Samples/s of the server and of each job, from successive server stats.
    A consumer belongs to the job whose process it is or descends from."""

    def __init__(self, jobs: Sequence[Job]) -> None:
        self._jobs = {j.pid: j.index for j in jobs}
        self._owner: Dict[int, Optional[int]] = {}
        self._last: Optional[Tuple[float, int, Dict[int, Tuple[int, int]]]] = None

    def _job_of(self, pid: int) -> Optional[int]:
        if pid not in self._owner:
            root = _proc.owner_of(pid, self._jobs)
            self._owner[pid] = None if root is None else self._jobs[root]
        return self._owner[pid]

    def update(self, stats: Dict[str, Any], now: float) -> Tuple[Optional[float], Dict[int, float]]:
        """(server samples/s, {job: samples/s}) since the previous update (None at first)."""
        published = int(stats.get("samples_published", 0))
        consumers = {int(c["id"]): (int(c.get("pid", 0)), int(c.get("samples", 0)))
                     for c in stats.get("consumers", []) if c.get("attached", True)}
        last, self._last = self._last, (now, published, consumers)
        if last is None or now <= last[0]:
            return None, {}
        dt = now - last[0]
        jobs: Dict[int, float] = {}
        for cid, (pid, samples) in consumers.items():
            job = self._job_of(pid)
            if job is not None and cid in last[2]:
                jobs[job] = jobs.get(job, 0.0) + (samples - last[2][cid][1]) / dt
        return (published - last[1]) / dt, jobs


def status_text(elapsed: float, server_rate: Optional[float], job_rates: Dict[int, float],
                jobs: Sequence[Job], mps_on: bool) -> str:
    m, s = divmod(int(elapsed), 60)
    parts = []
    for j in jobs:
        if j.poll() is not None:
            parts.append(f"{j.index} exit {j.exit_status}")
        elif j.index in job_rates:
            parts.append(f"{j.index} {job_rates[j.index]:,.0f}")
        else:
            parts.append(f"{j.index} -")
    rate = "-" if server_rate is None else f"{server_rate:,.0f}"
    return (f"{PREFIX} {m}:{s:02d}  server {rate} samples/s  jobs: " + " | ".join(parts) +
            f"  MPS {'on' if mps_on else 'off'}")


# ---- the run --------------------------------------------------------------


class _Stopper:
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


def run(args: argparse.Namespace, command: List[str]) -> int:
    import batchcast

    console = Console()
    batchcast.set_log_level(args.log_level)
    try:
        mps = Mps.start(args.mps)
    except RuntimeError as e:
        console.line(f"{PREFIX} {e}", sys.stderr)
        return 2
    os.environ.update(mps.env)  # before the server's CUDA context, so that it joins MPS
    try:
        try:
            server = batchcast.Server(args.data, **server_kwargs(args))
        except (batchcast.BatchcastError, TypeError, ValueError) as e:
            console.line(f"{PREFIX} the server did not start: {e}", sys.stderr)
            return 2
        with server:
            return _run_jobs(args, command, server, mps, console)
    finally:
        console.clear()
        mps.stop()


def job_environment(environ: Mapping[str, str], console: Optional[Console] = None) -> Dict[str, str]:
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


def mps_advice(stats: Mapping[str, Any]) -> Optional[str]:
    """What to do when the server's GPU runs without MPS (its stats' ``mps``
    is false; a host ring has no such key): None otherwise."""
    if stats.get("mps") is not False:
        return None
    return (f"{PREFIX} MPS is off, so the GPU time-slices the jobs and this server (on an H100 "
            "four ResNet-18 jobs ran at 0.89-0.93 of their speed on synthetic data, a lone one "
            "at about 0.7): start MPS (--mps on, README \"Several jobs on one GPU\"), or host "
            "the server in one of the jobs instead of this launcher (README, \"Without MPS, host "
            "the server inside one of the jobs\"; 0.98-0.99)")


def _run_jobs(args: argparse.Namespace, command: List[str], server: Any, mps: Mps,
              console: Console) -> int:
    stats = server.stats()
    console.line(f"{PREFIX} server {server.name}: {args.data or 'synthetic'}, "
                 f"{server.epoch_len} samples per epoch, device {stats.get('device', '?')}, "
                 f"endpoint {server.endpoint}; MPS {mps.note}", sys.stderr)
    advice = mps_advice(stats)
    if advice is not None:
        console.line(advice, sys.stderr)
    argvs = [expand(command, k, args.jobs, server.name, server.endpoint, args.each)
             for k in range(args.jobs)]
    env = {**job_environment(os.environ, console), **mps.env, "BATCHCAST_SERVER": server.endpoint,
           "BATCHCAST_JOBS": str(args.jobs), "PYTHONUNBUFFERED": "1"}
    jobs: List[Job] = []
    stopper = _Stopper(jobs, console, args.grace, args.kill_after)
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
                code = _supervise(args, server, mps, console, jobs, stopper)
                return code if stopper.cause is not None else 127  # as a shell says
        return _supervise(args, server, mps, console, jobs, stopper)
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)


def _supervise(args: argparse.Namespace, server: Any, mps: Mps, console: Console,
               jobs: List[Job], stopper: _Stopper) -> int:
    interval = args.status_interval
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
                             f"{j.ended - j.started:.1f} s", sys.stderr)
                if status != 0 and stopper.stage == 0:  # not one that we stopped
                    failed.append(j)
                    if args.fail_fast:
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
                server_rate, job_rates = rates.update(server.stats(), now)
            except Exception:  # noqa: BLE001 - a stopped server has no stats
                server_rate, job_rates = None, {}
            console.status(status_text(now - start, server_rate, job_rates, jobs, mps.active))
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


def main(argv: Optional[Sequence[str]] = None) -> int:
    args, command = parse_args(sys.argv[1:] if argv is None else argv)
    return run(args, command)


if __name__ == "__main__":
    sys.exit(main())
