"""The batchcast build and `batchcast-server` processes, as the Python benchmarks use them."""
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_build(arg: Optional[str] = None) -> Optional[str]:
    """The batchcast build: `arg`, else $BATCHCAST_BUILD_DIR (absolute or
    relative to the repository), else build/, build-gpu/ or build-py/ of
    the repository. Its python/ goes first on sys.path and on PYTHONPATH
    (for the processes a benchmark starts). None where there is none (an
    installed batchcast may still be importable)."""
    env = os.environ.get("BATCHCAST_BUILD_DIR")
    cands = [arg] + ([env, os.path.join(REPO, env)] if env else [])
    cands += [os.path.join(REPO, d) for d in ("build", "build-gpu", "build-py")]
    for cand in cands:
        if cand and os.path.isdir(os.path.join(cand, "python", "batchcast")):
            build = os.path.abspath(cand)
            python = os.path.join(build, "python")
            if python not in sys.path:
                sys.path.insert(0, python)
            path = os.environ.get("PYTHONPATH")
            os.environ["PYTHONPATH"] = python + (os.pathsep + path if path else "")
            return build
    return None


def server_bin(build: Optional[str]) -> str:
    """`batchcast-server` of `build`, else the one on PATH; exits where there is none."""
    cands = [os.path.join(build, "tools", "batchcast-server")] if build else []
    cands.append(shutil.which("batchcast-server"))
    found = next((c for c in cands if c and os.access(c, os.X_OK)), None)
    if not found:
        sys.exit("batchcast-server not found: build it (scripts/build.sh) and set "
                 "BATCHCAST_BUILD_DIR")
    return found


def serve_flags(options: Dict[str, Any]) -> List[str]:
    """batchcast.Server keywords as `batchcast-server serve` flags (a bool: --x / --no-x)."""
    flags = []
    for key, value in options.items():
        flag = key.replace("_", "-")
        if isinstance(value, bool):
            flags.append(("--" if value else "--no-") + flag)
        else:
            flags += ["--" + flag, str(value)]
    return flags


def wait_up(name: str, proc: subprocess.Popen, timeout: float = 300.0) -> None:
    """Returns once the server `name` answers for its stats; RuntimeError if
    `proc`, the process that runs it, ends first, or after `timeout` seconds."""
    import batchcast

    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            batchcast.query_stats(name, timeout=1)
            return
        except batchcast.BatchcastError:
            time.sleep(0.05)
    why = f"exited with {proc.returncode}" if proc.poll() is not None else f"not up in {timeout} s"
    raise RuntimeError(f"server {name}: {why}")


def stat_text(binary: str, name: str) -> str:
    """What `batchcast-server stat NAME` prints (for people)."""
    try:
        r = subprocess.run([binary, "stat", name], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"(batchcast-server stat failed: {e})"
    return (r.stdout or r.stderr).rstrip()


class ServerProcess:
    """`batchcast-server serve [DATA] --name NAME` with `options` (batchcast.Server
    keywords) in a process of its own, up once its stats answer; stop() (or
    the end of a with block) ends it. `log`: a file for its output (default:
    this process's)."""

    def __init__(self, binary: str, name: str, options: Dict[str, Any],
                 data: Optional[str] = None, log: Any = None,
                 env: Optional[Dict[str, str]] = None, log_level: str = "warn",
                 timeout: float = 300.0) -> None:
        self.name = name
        self.binary = binary
        self.cmd = [binary, "--log-level", log_level, "serve", *([data] if data else []),
                    "--name", name, "--status-interval", "0", *serve_flags(options)]
        if log is not None:
            log.write(f"== {' '.join(self.cmd)}\n")
            log.flush()
        self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        self.pid = self.proc.pid
        try:
            wait_up(name, self.proc, timeout)
        except BaseException:
            self.stop()
            raise

    def stats(self) -> Dict[str, Any]:
        import batchcast

        return batchcast.query_stats(self.name, timeout=5)

    def stat_text(self) -> str:
        return stat_text(self.binary, self.name)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> "ServerProcess":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
