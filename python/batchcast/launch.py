"""batchcast.launch: one server on a dataset and N training jobs reading it.

The common case of co-location in one command (also installed as
``batchcast-launch``)::

    python3 -m batchcast.launch /data/imagenet/train --jobs 4 --device cuda:0 \\
        --size 224 --dtype bfloat16 --batch-size 256 \\
        --each lr=0.1,0.2,0.4,0.8 -- python3 train.py --shared {name} --lr {lr}

It starts MPS where it may (``--mps auto``, the default; the first line
says whether MPS is on), then a batchcast server in this process (the
options of ``batchcast-server serve``, docs/options.md, passed on as
written), then the N commands after ``--``, each in its own process group.
In each command

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
server's stats of its consumers) with the share of the interval each job
waited for data (``wait 40%``: the server had no batch for it that long;
near 100 %, the job is input-bound): refreshed in place on a terminal,
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

``--device cuda:all`` (or ``cuda:0,1``) serves every GPU of the node: a ring
per GPU, sharing one stream (each sample decoded once, on the GPU of a job
that reads it); put job k on its GPU with a list, e.g. ``-- python3 train.py
--device 'cuda:{0,1,2,3}'``, so that each job reads its own GPU's ring.

Jobs are independent consumers: each gets the whole stream (every sample
once per its epoch) at its own batch size; the server's window bounds how
far the fastest runs ahead of the slowest (see docs/semantics.md, "Window").
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from batchcast import _core
from batchcast._launch_jobs import PREFIX, Console, job_environment
from batchcast._launch_supervision import Supervision, run_jobs
from batchcast._launch_templates import expand, list_lengths, parse_each
from batchcast._mps import Mps

__all__ = ["expand", "job_environment", "list_lengths", "main", "mps_advice", "parse_args",
           "parse_each", "run", "server_options"]

# ---- server options -------------------------------------------------------


def _server_options() -> List[_core.ServerOption]:
    """The server options of the launcher's command line (DATA is its own)."""
    return [o for o in _core.server_options() if o.name != "data"]


def _add_server_options(parser: argparse.ArgumentParser) -> None:
    """One argument per option of the server's option table: flags as
    --x / --no-x, the others taking one value, kept as text."""
    groups: Dict[str, Any] = {}
    for o in _server_options():
        g = groups.get(o.group) or groups.setdefault(
            o.group, parser.add_argument_group(f"server options ({o.group})"))
        help_text = o.help.replace("%", "%%") + (" (CUDA ring only)" if o.cuda_only else "")
        if o.type == "flag":
            g.add_argument(o.command_line, dest=f"server_{o.name}",
                           action=argparse.BooleanOptionalAction, default=None,
                           help=f"{help_text} (default {'on' if o.default == 'true' else 'off'})")
        else:
            shown = f" (default {o.default})" if o.default else ""
            g.add_argument(o.command_line, dest=f"server_{o.name}",
                           metavar=o.value_name or o.name.upper(), default=None,
                           help=help_text + shown)


def server_options(args: argparse.Namespace) -> Dict[str, str]:
    """The server options given on the command line, as text: the server's
    option table reads them (batchcast.Server.from_text), whatever they look
    like."""
    out: Dict[str, str] = {} if args.data is None else {"data": args.data}
    for o in _server_options():
        value = getattr(args, f"server_{o.name}", None)
        if value is not None:
            out[o.name] = ("true" if value else "false") if isinstance(value, bool) else value
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
    data = next(o for o in _core.server_options() if o.name == "data")
    parser.add_argument("data", nargs="?", metavar="DATA", help=data.help.replace("%", "%%"))
    parser.add_argument("-n", "--jobs", type=int, help="jobs to start (default: the lists' length)")
    parser.add_argument("--each", action="append", default=[], metavar="NAME=V1,V2,...",
                        help="job k gets the k-th value as {NAME} (shell-safe lists)")
    parser.add_argument("--mps", choices=("auto", "on", "off"), default="auto",
                        help="start NVIDIA MPS for the jobs: auto (where it may), on (or fail), "
                             "off")
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
    command = argv[cut + 1:]
    if not command:
        parser.error("the job command after '--' is empty")
    try:
        args.each = parse_each(args.each)
    except ValueError as e:
        parser.error(str(e))
    lengths = set(list_lengths(command)) | {len(v) for v in args.each.values()}
    if args.jobs is None:
        if len(lengths) > 1:
            parser.error(f"the lists (--each, {{a,b,...}}) have different lengths "
                         f"{sorted(lengths)}")
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


# ---- the run --------------------------------------------------------------


def mps_advice(stats: Mapping[str, Any]) -> Optional[str]:
    """What to do when the server's GPU runs without MPS (its stats' ``mps``
    is false; a host ring has no such key): None otherwise."""
    if stats.get("mps") is not False:
        return None
    return (f"{PREFIX} MPS is off, so the GPU time-slices the jobs and this server, and each job "
            "loses part of its speed: start MPS (--mps on, README \"Several jobs on one GPU\"), "
            "or host the server in one of the jobs instead of this launcher (docs/performance.md, "
            "\"Without MPS, host the server inside one of the jobs\")")


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
            server = batchcast.Server.from_text(server_options(args))
        except (batchcast.BatchcastError, TypeError, ValueError) as e:
            console.line(f"{PREFIX} the server did not start: {e}", sys.stderr)
            return 2
        with server:
            stats = server.stats()
            console.line(f"{PREFIX} server {server.name}: {args.data or 'synthetic'}, "
                         f"{server.epoch_len} samples per epoch, device "
                         f"{stats.get('device', '?')}, endpoint {server.endpoint}; MPS {mps.note}",
                         sys.stderr)
            if "metrics_endpoint" in stats:
                console.line(f"{PREFIX} metrics for Prometheus on {stats['metrics_endpoint']}",
                             sys.stderr)
            advice = mps_advice(stats)
            if advice is not None:
                console.line(advice, sys.stderr)
            argvs = [expand(command, k, args.jobs, server.name, server.endpoint, args.each)
                     for k in range(args.jobs)]
            env = {**job_environment(os.environ, console), **mps.env,
                   "BATCHCAST_SERVER": server.endpoint, "BATCHCAST_JOBS": str(args.jobs),
                   "PYTHONUNBUFFERED": "1"}
            how = Supervision(grace=args.grace, kill_after=args.kill_after,
                              fail_fast=args.fail_fast, status_interval=args.status_interval,
                              mps_on=mps.active)
            return run_jobs(argvs, env, server, console, how)
    finally:
        console.clear()
        mps.stop()


def main(argv: Optional[Sequence[str]] = None) -> int:
    args, command = parse_args(sys.argv[1:] if argv is None else argv)
    return run(args, command)


if __name__ == "__main__":
    sys.exit(main())
