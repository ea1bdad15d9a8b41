"""batchcast.launch: one server, N jobs (pytest, CPU).

The jobs are small Python programs reading a synthetic server through
batchcast.Loader (JOB below). Checks: the {name}/{rank}/{a,b} expansion,
server options handed to the server as text (its option table reads them:
--key-file 123 is a file name), output prefixed per
job, status lines with each job's rate, the exit status (0; a failing job's
status; 128+signal after Ctrl-C), and that Ctrl-C stops every job (SIGINT,
then SIGTERM after --grace for a job that ignores SIGINT).
"""
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import _bc_helpers as H

batchcast = H.require_batchcast()
from batchcast import launch  # noqa: E402

JOB = r'''
import argparse, os, signal, sys, time
p = argparse.ArgumentParser()
p.add_argument("--shared"); p.add_argument("--rank", type=int); p.add_argument("--lr")
p.add_argument("--batches", type=int, default=20); p.add_argument("--sleep", type=float, default=0)
p.add_argument("--fail-rank", type=int, default=-1)
p.add_argument("--forever", action="store_true")
p.add_argument("--ignore-sigint", action="store_true")
a = p.parse_args()
if a.ignore_sigint:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
n = 0
try:  # from the start: a SIGINT while batchcast loads (a loaded machine) is seen too
    import batchcast
    loader = batchcast.Loader(a.shared, batch_size=16, timeout=30)
    print(f"pid {os.getpid()} rank {a.rank} lr {a.lr} job {os.environ['BATCHCAST_JOB']} of "
          f"{os.environ['BATCHCAST_JOBS']} server {os.environ['BATCHCAST_SERVER']} "
          f"group {loader.group} len {len(loader)} local_rank {os.environ.get('LOCAL_RANK')}")
    while a.forever or n < a.batches:
        for images, labels in loader:
            assert images.shape == (16, 3, 8, 8), images.shape
            n += 1
            if n == 1:
                print("running")
            time.sleep(a.sleep)
            if not a.forever and n >= a.batches:
                break
except KeyboardInterrupt:
    print("got SIGINT")
    sys.exit(130)
if a.rank == a.fail_rank:
    print("failing on purpose", file=sys.stderr)
    sys.exit(3)
print(f"done {n} batches")
'''

SERVER = ["--synthetic", "4096", "--size", "8", "--batch-size", "32", "--window", "4",
          "--workers", "1", "--mps", "off"]


@pytest.fixture
def job_py(tmp_path):
    path = tmp_path / "job.py"
    path.write_text(JOB)
    return str(path)


def _env():
    return H.python_env(drop=("CUDA_MPS_PIPE_DIRECTORY",))


def _launch(args, timeout=60):
    return subprocess.run([sys.executable, "-m", "batchcast.launch", *args], env=_env(),
                          capture_output=True, text=True, timeout=timeout)


class _Running:
    """A launcher in the background; .lines collects its stdout and stderr."""

    def __init__(self, args):
        self.proc = subprocess.Popen([sys.executable, "-m", "batchcast.launch", *args], env=_env(),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, predicate, timeout=30):
        deadline = time.monotonic() + timeout
        while not predicate(self.lines):
            assert self.proc.poll() is None, "launcher exited early:\n" + "\n".join(self.lines)
            assert time.monotonic() < deadline, "timed out; output:\n" + "\n".join(self.lines)
            time.sleep(0.05)

    def finish(self, timeout=30):
        try:
            self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)
        return self.proc.returncode, "\n".join(self.lines)


def _job_pids(lines):
    return [int(line.split(" pid ")[1].split()[0]) for line in lines if " pid " in line]


def _gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # A zombie is gone for our purpose (its parent, the launcher, reaps it).
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "Z"


# ---- the command line -------------------------------------------------------


def test_expand_names_ranks_and_lists():
    cmd = ["train.py", "--shared", "{name}", "--rank={rank}", "--lr", "{0.1,0.2,0.4}",
           "--of", "{jobs}", "--at", "{endpoint}", "--keep", "{}", "{x}", "--j{job}"]
    got = [launch.expand(cmd, k, 3, "srv", "ipc:///s") for k in range(3)]
    assert got[0] == ["train.py", "--shared", "srv", "--rank=0", "--lr", "0.1", "--of", "3",
                      "--at", "ipc:///s", "--keep", "{}", "{x}", "--j0"]
    assert [g[5] for g in got] == ["0.1", "0.2", "0.4"]
    assert [g[3] for g in got] == ["--rank=0", "--rank=1", "--rank=2"]
    assert launch.list_lengths(cmd) == [3]
    with pytest.raises(ValueError, match="3 items for 2 jobs"):
        launch.expand(cmd, 0, 2, "srv", "ipc:///s")


def test_jobs_from_lists_and_bad_command_lines(capsys):
    args, command = launch.parse_args(["--synthetic", "10", "--", "t.py", "--lr", "{1,2}"])
    assert args.jobs == 2 and command == ["t.py", "--lr", "{1,2}"]
    assert args.server_name.startswith("batchcast-launch-")
    for bad, message in (
        (["--synthetic", "10", "--jobs", "2"], "after '--'"),
        (["--synthetic", "10", "--", "t.py"], "--jobs"),
        (["--synthetic", "10", "--jobs", "3", "--", "t.py", "{1,2}"], "2 items for 3 jobs"),
        (["--jobs", "2", "--", "t.py"], "DATA"),
    ):
        with pytest.raises(SystemExit) as e:
            launch.parse_args(bad)
        assert e.value.code == 2
        assert message in capsys.readouterr().err, bad


def test_server_options_reach_the_server_as_text():
    # The launcher guesses no types: the server's option table reads the text.
    args, _ = launch.parse_args([
        "--synthetic", "100", "--size", "8", "--batch-size", "16", "--window", "4",
        "--lag-timeout", "1.5", "--heartbeat-timeout", "3", "--no-shuffle", "--dtype", "uint8",
        "--mean", "0.5,0.5,0.5", "--device", "cpu", "--workers", "1", "--lag-policy", "skip",
        "--name", "x", "--jobs", "1", "--", "t.py", "{rank}"])
    kw = launch.server_options(args)
    assert kw == {"synthetic": "100", "size": "8", "batch_size": "16", "window": "4",
                  "lag_timeout": "1.5", "heartbeat_timeout": "3", "shuffle": "false",
                  "dtype": "uint8", "mean": "0.5,0.5,0.5", "device": "cpu", "workers": "1",
                  "lag_policy": "skip", "name": "x"}
    kw["name"] = H.unique_name("launch-opts")
    with batchcast.Server.from_text(kw) as server:
        stats = server.stats()
        assert stats["lag_policy"] == "skip" and stats["window"] == 4, stats
        assert server.epoch_len == 100
    with pytest.raises(batchcast.InvalidArgument, match=r"^window \(--window\)"):
        batchcast.Server.from_text({"synthetic": "10", "window": "four",
                                    "name": H.unique_name("launch-opts")})


def test_every_server_option_is_on_the_command_line():
    # From the option table: flags as --x / --no-x, the others take a value.
    for o in batchcast._core.server_options():
        if o.name == "data":
            continue
        value = [] if o.type == "flag" else [o.default or "1"]
        argv = ["--synthetic", "10", "--jobs", "1", o.command_line, *value, "--", "t.py"]
        if o.name == "synthetic":
            argv = argv[2:]
        args, _ = launch.parse_args(argv)
        assert launch.server_options(args)[o.name] == (value[0] if value else "true"), o.name
        if o.type == "flag":
            off = "--no-" + o.command_line[2:]
            args, _ = launch.parse_args(["--synthetic", "10", "--jobs", "1", off, "--", "t.py"])
            assert launch.server_options(args)[o.name] == "false", o.name


def test_a_number_like_text_option_is_text(job_py, tmp_path):
    # --key-file 123 names a file "123" (no type is guessed from how a value looks).
    made = subprocess.run([H.require_server(), "key", "--new", "123"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=30)
    assert made.returncode == 0, made.stderr
    env = {**_env(), "BATCHCAST_KEY_FILE": str(tmp_path / "123")}  # the jobs' copy
    r = subprocess.run([sys.executable, "-m", "batchcast.launch", *SERVER, "--endpoint",
                        "tcp://127.0.0.1:0", "--key-file", "123", "--jobs", "1", "--",
                        sys.executable, job_py, "--shared", "{endpoint}", "--batches", "5"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[job 0] done 5 batches" in r.stdout, r.stdout
    assert "endpoint tcp://127.0.0.1:" in r.stderr, r.stderr


def test_jobs_do_not_inherit_a_launcher_rank():
    env = {"PATH": "/bin", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "RANK": "5",
           "TORCHELASTIC_RUN_ID": "r", "MASTER_PORT": "29500", "SLURM_LOCALID": "0",
           "SLURM_PROCID": "3", "SLURM_JOB_ID": "7", "BATCHCAST_GROUP": "g", "HOME": "/root"}
    assert launch.job_environment(env) == {"PATH": "/bin", "SLURM_JOB_ID": "7", "HOME": "/root"}
    assert set(batchcast._core.launcher_rank_variables()) >= {
        "LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID", "SLURM_LOCALID", "BATCHCAST_GROUP"}


def test_mps_advice_only_for_a_gpu_server_without_mps():
    # A GPU server's stats say whether MPS is on (true, false or "unknown");
    # a host ring's have no such key. Only "off" gets the advice, which names
    # both ways out.
    advice = launch.mps_advice({"mps": False, "device": "cuda:0"})
    assert advice is not None and advice.startswith("[launch] MPS is off")
    assert "--mps on" in advice and "host the server in one of the jobs" in advice, advice
    for stats in ({"mps": True}, {"mps": "unknown"}, {"device": "cpu"}):
        assert launch.mps_advice(stats) is None, stats


# ---- running jobs -------------------------------------------------------------


def test_jobs_run_with_prefixed_output_and_status_lines(job_py):
    r = _launch([*SERVER, "--status-interval", "0.3", "--", sys.executable, job_py,
                 "--shared", "{name}", "--rank", "{rank}", "--lr", "{0.1,0.2}",
                 "--batches", "150", "--sleep", "0.01"])
    assert r.returncode == 0, r.stdout + r.stderr
    for k, lr in ((0, "0.1"), (1, "0.2")):
        assert f"[job {k}] done 150 batches" in r.stdout, r.stdout
        said = f"rank {k} lr {lr} job {k} of 2 server ipc://"
        assert any(line.startswith(f"[job {k}] pid ") and said in line
                   for line in r.stdout.splitlines()), r.stdout
    assert "MPS off" in r.stderr
    assert "MPS is off, so" not in r.stderr, r.stderr  # a host ring: no advice
    assert "2 of 2 job(s) succeeded" in r.stderr
    # Plain status lines (not a terminal): the server's and each job's rate.
    status = [line for line in r.stderr.splitlines() if "samples/s  jobs:" in line]
    assert status, r.stderr
    rated = [line for line in status
             if "| 1 " in line and " 0 -" not in line and "server -" not in line]
    assert rated, status


def test_jobs_under_torchrun_or_slurm_are_independent_consumers(job_py):
    # batchcast.launch itself run as a rank (an sbatch script, torchrun): its
    # jobs must not join that rank's consumer group (two "rank 1 of 2" would
    # be refused, or split the stream between unrelated jobs).
    env = {**_env(), "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "x",
           "SLURM_LOCALID": "1", "SLURM_NTASKS_PER_NODE": "2", "SLURM_JOB_ID": "4"}
    r = subprocess.run([sys.executable, "-m", "batchcast.launch", *SERVER, "--jobs", "2", "--",
                        sys.executable, job_py, "--shared", "{name}", "--rank", "{rank}",
                        "--batches", "10"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    for k in range(2):
        assert f"[job {k}] done 10 batches" in r.stdout, r.stdout
    lines = [line for line in r.stdout.splitlines() if " pid " in line]
    assert len(lines) == 2, lines
    assert all("group None len 256 local_rank None" in line for line in lines), lines
    assert "do not inherit this process's launcher rank (LOCAL_RANK" in r.stderr, r.stderr


def test_a_failing_job_fails_the_launch_and_the_others_finish(job_py):
    r = _launch([*SERVER, "--jobs", "2", "--", sys.executable, job_py, "--shared", "{name}",
                 "--rank", "{rank}", "--batches", "30", "--fail-rank", "1"])
    assert r.returncode == 3, r.stdout + r.stderr
    assert "[job 0] done 30 batches" in r.stdout
    assert "[job 1] failing on purpose" in r.stderr
    assert "1 of 2 job(s) succeeded; failed: job 1 (3)" in r.stderr


def test_fail_fast_stops_the_others(job_py):
    # Job 0 runs forever; job 1 fails at once: --fail-fast stops job 0 (SIGINT).
    r = _launch([*SERVER, "--fail-fast", "--", sys.executable, job_py, "--shared", "{name}",
                 "--rank", "{rank}", "--batches", "1", "--fail-rank", "1",
                 "{--forever,--sleep=0}"])
    assert r.returncode == 3, r.stdout + r.stderr
    assert "[job 0] got SIGINT" in r.stdout
    assert "failed: job 1 (3); stopped: job 0 (130)" in r.stderr


def test_ctrl_c_stops_every_job_and_the_server(job_py):
    run = _Running([*SERVER, "--jobs", "2", "--", sys.executable, job_py, "--shared", "{name}",
                    "--rank", "{rank}", "--forever", "--sleep", "0.01"])
    run.wait_for(lambda lines: sum(line.endswith("] running") for line in lines) == 2)
    pids = _job_pids(run.lines)
    run.proc.send_signal(signal.SIGINT)
    code, out = run.finish(timeout=30)
    assert code == 128 + signal.SIGINT, out
    assert "sending SIGINT to job(s) 0, 1" in out
    assert "[job 0] got SIGINT" in out and "[job 1] got SIGINT" in out
    assert "stopped: job 0 (130), job 1 (130)" in out
    assert len(pids) == 2 and all(_gone(p) for p in pids), pids


def test_ctrl_c_escalates_to_sigterm_after_the_grace_period(job_py):
    run = _Running([*SERVER, "--jobs", "1", "--grace", "1", "--", sys.executable, job_py,
                    "--shared", "{name}", "--forever", "--sleep", "0.01", "--ignore-sigint"])
    run.wait_for(lambda lines: any(line.endswith("] running") for line in lines))
    pids = _job_pids(run.lines)
    start = time.monotonic()
    run.proc.send_signal(signal.SIGINT)
    code, out = run.finish(timeout=30)
    assert code == 128 + signal.SIGINT, out
    assert "sending SIGTERM to job(s) 0" in out
    assert f"stopped: job 0 ({128 + signal.SIGTERM})" in out
    assert time.monotonic() - start < 15
    assert all(_gone(p) for p in pids), pids
