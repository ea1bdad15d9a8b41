"""benchmarks/bench_proc.py: the benchmarks' CPU readings from /proc.

A hosted server's CPU (benchmarks/colocate.py, source "hosted") is told from
its trainer's by its threads' names (bc-*, core/src/thread_name.h); a set of
processes that changes between two readings counts only what those present
at both used.
"""
import os
import subprocess
import sys
import time

import _bc_helpers as H

batchcast = H.require_batchcast()
sys.path.insert(0, os.path.join(H.REPO, "benchmarks"))

from bench_proc import CpuMeter, cpu_seconds, descendants, server_thread_cpu_seconds  # noqa: E402


def read_until_the_server_is_charged(loader):
    """At least 300 batches, and on until the server's threads have been
    charged CPU time: it comes in clock ticks (10 ms), and 300 batches of
    3 MiB take them a few ticks, or none."""
    for _epoch in range(20):  # 312 batches each, about 0.1 s
        for n, _ in enumerate(loader):
            if n >= 300 and server_thread_cpu_seconds(os.getpid()) > 0.0:
                return


def test_server_thread_cpu_seconds_counts_the_servers_threads_only():
    assert server_thread_cpu_seconds(os.getpid()) == 0.0  # no server yet
    with batchcast.Server(synthetic=20000, size=128, batch_size=64, window=4, workers=2,
                          name=H.unique_name("cpu")) as srv:
        with batchcast.Loader(srv.endpoint, batch_size=64) as loader:
            read_until_the_server_is_charged(loader)
        used = server_thread_cpu_seconds(os.getpid())
        assert 0.0 < used < cpu_seconds(os.getpid()), used
    assert server_thread_cpu_seconds(2**22 + 12345) == 0.0  # no such process: nothing, no error


def test_cpu_meter_counts_the_processes_present_at_both_readings():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in descendants([os.getpid()])
        gone = 2**22 + 12345
        before = CpuMeter.read([os.getpid(), child.pid, gone])
        assert set(before) == {os.getpid(), child.pid}  # a process that is gone is left out
        t = time.process_time()
        while time.process_time() - t < 0.3:  # 0.3 s of CPU in this process
            pass
        after = CpuMeter.read([os.getpid(), child.pid])
        assert 0.2 < CpuMeter.used(before, after) < 5.0
        assert CpuMeter.used(before, {child.pid: after[child.pid]}) < 0.2
    finally:
        child.kill()
        child.wait()
