"""The README's recipe "several jobs on one GPU without MPS": job 0 hosts the
server (batchcast.Server with min_consumers = the number of jobs), the other
jobs wait for its name and read it with Loaders, and job 0 keeps the server
until they have left. Here on the CPU with a synthetic source, the jobs
started in either order and reading different numbers of epochs.
"""
import subprocess
import sys

import pytest

import _bc_helpers as H

H.require_batchcast()

JOB = r"""
import sys, time
import batchcast

batchcast.set_log_level("warn")
name, jobs, rank, epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
if rank == 0:
    server = batchcast.Server(synthetic=640, name=name, device="cpu", batch_size=64, size=8,
                              window=4, min_consumers=jobs)
else:
    deadline = time.monotonic() + 30
    while True:
        try:
            batchcast.query_stats(name)
            break
        except (batchcast.NotFound, batchcast.Timeout, batchcast.ServerUnavailable):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
loader = batchcast.Loader(name, batch_size=32, timeout=30)
for epoch in range(epochs):
    seen = [i for _ in loader for i in loader.indices]
    print(f"job {rank} epoch {epoch}: {len(seen)} samples, {len(set(seen))} distinct", flush=True)
loader.close()
if rank == 0:
    while server.stats()["consumers"]:
        time.sleep(0.2)
    server.close()
    print("job 0: the others left", flush=True)
"""


@pytest.mark.parametrize("host_first", [True, False])
def test_job_0_hosts_the_server_and_outlives_the_other_jobs(tmp_path, host_first):
    script = tmp_path / "job.py"
    script.write_text(JOB)
    name = H.unique_name("hosted")
    epochs = {0: 1, 1: 3, 2: 2}  # job 0 finishes first, and waits

    def start(rank):
        return subprocess.Popen([sys.executable, str(script), name, "3", str(rank),
                                 str(epochs[rank])], env=H.python_env(), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    order = [0, 1, 2] if host_first else [2, 1, 0]
    procs = {}
    for rank in order:
        procs[rank] = start(rank)
    outs = {rank: p.communicate(timeout=120)[0] for rank, p in procs.items()}
    for rank, p in procs.items():
        assert p.returncode == 0, outs[rank]
        for epoch in range(epochs[rank]):
            assert f"job {rank} epoch {epoch}: 640 samples, 640 distinct" in outs[rank], outs[rank]
    assert "job 0: the others left" in outs[0], outs[0]
