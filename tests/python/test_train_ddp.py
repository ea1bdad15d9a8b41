"""examples/train_ddp.py under torchrun on the CPU (gloo), 2 ranks (pytest).

The ranks take their consumer group from torchrun's variables; local rank 0
serves a synthetic dataset (shard_from_env: shard 0 of 1). Checks: both
epochs run on both ranks with the same batch count, and the ranks read
disjoint samples that together make the whole epoch (the example's
--check-split); and a job stopped mid-epoch with a checkpoint, run again with
--resume, reads the rest of that epoch on every rank; the same with a server
per rank (--server-per-rank), each rank reading its own shard. Skips when torchrun
(torch.distributed.run) is missing.
"""
import argparse
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import _bc_helpers as H

batchcast = H.require_batchcast()

EXAMPLE = os.path.join(H.REPO, "examples", "train_ddp.py")


def _torchrun_missing():
    try:
        return importlib.util.find_spec("torch.distributed.run") is None
    except ImportError:
        return True


def _torchrun(tmp_path, *args, launch=False):
    """examples/train_ddp.py on 2 CPU ranks under torchrun: its output (the
    test fails unless it exits with 0 within 240 s). With `launch`, torchrun
    runs as the one job of batchcast.launch and the ranks read its server
    (--shared {name}), as the README's recipe under MPS does."""
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    env = H.python_env()
    env["OMP_NUM_THREADS"] = "1"
    for v in ("LOCAL_RANK", "BATCHCAST_GROUP", "SLURM_LOCALID", "SLURM_PROCID"):
        env.pop(v, None)
    # --redirects/--tee 2 (stderr to a log file and to the console): torchrun of
    # torch < 2.0 under Python >= 3.11 fails with its default "0"
    # ('NoneType' object has no attribute 'get': Flag iteration skips 0).
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
                "2", "--redirects", "2", "--tee", "2", "--log_dir", str(tmp_path / "logs"), EXAMPLE]
    example = ["--size", "32", "--batch-size", "8", "--num-classes", "10", "--check-split", *args]
    if launch:
        cmd = [sys.executable, "-m", "batchcast.launch", "--synthetic", "192", "--size", "32",
               "--batch-size", "8", "--jobs", "1", "--mps", "off", "--status-interval", "0", "--",
               *torchrun, "--shared", "{name}", *example]
    else:
        cmd = [*torchrun, "--synthetic", "192", *example]
    # In a session of its own, so that a rank left behind (a hang at exit:
    # examples/train_ddp.py, "Note: the model goes before the process group")
    # is killed with torchrun instead of spinning on after the test.
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        stdout, stderr = p.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        stdout, stderr = p.communicate()
        pytest.fail("torchrun did not end in 240 s:\n" + stdout + stderr)
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # ranks that outlived torchrun
        except ProcessLookupError:
            pass
    out = stdout + stderr
    assert p.returncode == 0, out
    return out


def _assert_two_exact_epochs(out):
    # 192 samples / (2 ranks x 8) = 12 batches per rank and epoch.
    for rank in range(2):
        assert re.search(rf"\[rank {rank}\] batchcast.Loader\(.*group='torchrun:[^']+', "
                         rf"rank={rank}, world_size=2.*: 12 batches per epoch", out), out
        for epoch in range(2):
            assert f"[rank {rank}] epoch {epoch}: 12 batches, 96 images" in out, out
    for epoch in range(2):
        assert f"epoch {epoch}: 2 ranks, 12..12 batches per rank, 192 images" in out, out
        assert f"epoch {epoch}: split ok: 192 samples read, 192 distinct" in out, out


@pytest.mark.skipif(_torchrun_missing(), reason="torchrun (torch.distributed.run) is not installed")
def test_train_ddp_example_on_two_cpu_ranks(tmp_path):
    out = _torchrun(tmp_path, "--epochs", "2")
    _assert_two_exact_epochs(out)
    # Local rank 0 says where its server's rings are and whether MPS serves them.
    assert "[rank 0] the node's server: rings cpu, MPS n/a" in out, out
    assert "MPS is off" not in out, out


@pytest.mark.skipif(_torchrun_missing(), reason="torchrun (torch.distributed.run) is not installed")
def test_train_ddp_example_with_ranks_that_decode_their_rings(tmp_path):
    """--produce: rank 1 decodes the node server's (host) ring in its own
    process (rank 0's process hosts the server); the split stays exact."""
    out = _torchrun(tmp_path, "--epochs", "2", "--produce")
    _assert_two_exact_epochs(out)
    assert "[rank 1] decodes the node server's ring on cpu in this process" in out, out
    assert "[rank 0] decodes" not in out, out


@pytest.mark.skipif(_torchrun_missing(), reason="torchrun (torch.distributed.run) is not installed")
def test_train_ddp_example_advises_a_server_per_rank_without_mps(monkeypatch):
    monkeypatch.syspath_prepend(os.path.dirname(EXAMPLE))  # its train_resnet
    spec = importlib.util.spec_from_file_location("train_ddp", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    advice = example.mps_advice("cuda:0,1", "off", ranks_decode=False)
    assert advice.startswith("MPS is off") and "--server-per-rank" in advice, advice
    assert "--produce" in advice, advice
    # Only rings on several GPUs without MPS, in the node's server.
    assert example.mps_advice("cuda:0,1", "on", ranks_decode=False) is None
    assert example.mps_advice("cuda:0", "off", ranks_decode=False) is None
    assert example.mps_advice("cuda:1", "off", ranks_decode=True) is None
    # Ranks decode their rings by default where the advice would apply.
    assert example.produce_by_default("cuda:0,1", False)
    assert not example.produce_by_default("cuda:0,1", True)  # MPS on
    assert not example.produce_by_default("cuda:0,1", None)  # unknown
    assert not example.produce_by_default("cuda:0", False)
    assert not example.produce_by_default("cpu:0,cpu:1", False)  # host rings


@pytest.mark.skipif(_torchrun_missing(), reason="torchrun (torch.distributed.run) is not installed")
def test_a_rank_decodes_its_ring_by_default_unless_the_server_refuses(monkeypatch, capsys):
    """Rings on several GPUs without MPS: a rank decodes its ring by
    default; a refusal then (here: another rank on its GPU decodes that
    ring already) leaves the decode to the server, with a line, where an
    explicit --produce raises it."""
    monkeypatch.syspath_prepend(os.path.dirname(EXAMPLE))  # its train_resnet
    spec = importlib.util.spec_from_file_location("train_ddp", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)

    class FakeBatchcast:
        ResourceExhausted, InvalidArgument, NotFound = (
            batchcast.ResourceExhausted, batchcast.InvalidArgument, batchcast.NotFound)
        opened = []

        @staticmethod
        def query_stats(name):
            return {"device": "cuda:0,1", "mps": False}

        @classmethod
        def Loader(cls, name, produce, **kw):
            cls.opened.append(produce)
            if produce:
                raise batchcast.ResourceExhausted("cuda:1 already has an attached producer")
            return "loader"

    def open_with(produce, hosts_server=False):
        FakeBatchcast.opened = []
        args = argparse.Namespace(produce=produce, batch_size=8, server_per_rank=False)
        return example.open_rank_loader(FakeBatchcast, args, "n", 3, hosts_server)

    assert open_with(None) == "loader" and FakeBatchcast.opened == [True, False]
    assert "[rank 3] the server decodes this rank's ring: " in capsys.readouterr().out
    with pytest.raises(batchcast.ResourceExhausted):
        open_with(True)
    assert open_with(None, hosts_server=True) == "loader" and FakeBatchcast.opened == [False]
    assert open_with(False) == "loader" and FakeBatchcast.opened == [False]


@pytest.mark.skipif(_torchrun_missing(), reason="torchrun (torch.distributed.run) is not installed")
def test_train_ddp_example_with_a_server_per_rank(tmp_path):
    """--server-per-rank: each rank hosts a server for its shard (rank of 2)
    and reads it without a group: the same exact epochs, each rank reading
    only its own shard; a job stopped mid-epoch and resumed from rank 0's
    checkpoint (every rank's place) reads the rest of that epoch."""
    out = _torchrun(tmp_path, "--epochs", "2", "--server-per-rank")
    for rank in range(2):
        assert re.search(rf"\[rank {rank}\] batchcast.Loader\('ddp-[^']+-r{rank}'.*: "
                         rf"12 batches per epoch of 96 samples", out), out
        assert f"[rank {rank}] its own server: rings cpu, MPS n/a" in out, out
        for epoch in range(2):
            assert f"[rank {rank}] epoch {epoch}: 12 batches, 96 images" in out, out
    for epoch in range(2):
        assert f"epoch {epoch}: 2 ranks, 12..12 batches per rank, 192 images" in out, out
        assert f"epoch {epoch}: split ok: 192 samples read, 192 distinct" in out, out
    ckpt = str(tmp_path / "ckpt.pt")
    logs = [str(tmp_path / "split0.jsonl"), str(tmp_path / "split1.jsonl")]
    first = _torchrun(tmp_path, "--epochs", "1", "--steps", "5", "--checkpoint", ckpt,
                      "--split-log", logs[0], "--server-per-rank")
    again = _torchrun(tmp_path, "--epochs", "2", "--resume", ckpt, "--split-log", logs[1],
                      "--server-per-rank")
    assert again.count(f"resumed from {ckpt}: epoch 0 after 5 batches") == 2, again
    for rank in range(2):
        assert f"[rank {rank}] epoch 1: 7 batches, 56 images" in again, again
    before, after = ([json.loads(line)["indices"] for line in Path(path).read_text().splitlines()]
                     for path in logs)
    assert not set(before[0]) & set(after[0]), first + again
    assert sorted(before[0] + after[0]) == list(range(192))
    # A checkpoint of the node server's group is not one of a server per rank.
    group_ckpt = str(tmp_path / "group.pt")
    _torchrun(tmp_path, "--epochs", "1", "--steps", "2", "--checkpoint", group_ckpt)
    with pytest.raises(AssertionError, match="a loader state per rank"):
        _torchrun(tmp_path, "--epochs", "1", "--resume", group_ckpt, "--server-per-rank")


@pytest.mark.skipif(_torchrun_missing(), reason="torchrun (torch.distributed.run) is not installed")
def test_train_ddp_example_as_the_job_of_the_launcher(tmp_path):
    """torchrun as batchcast.launch's job, its ranks one group of the
    launcher's server: the same exact epochs."""
    out = _torchrun(tmp_path, "--epochs", "2", launch=True)
    _assert_two_exact_epochs(out)
    assert "[launch] 1 of 1 job(s) succeeded" in out, out


@pytest.mark.skipif(_torchrun_missing(), reason="torchrun (torch.distributed.run) is not installed")
def test_train_ddp_example_resumes_every_rank_at_the_saved_round(tmp_path):
    """A job stopped after 5 of its 12 rounds, with rank 0's checkpoint, is
    run again with --resume (a new torchrun job, its in-process server started
    again with the same options): every rank reads the other 7 rounds of that
    epoch, split exactly, then whole epochs."""
    ckpt = str(tmp_path / "ckpt.pt")
    logs = [str(tmp_path / "split0.jsonl"), str(tmp_path / "split1.jsonl")]
    first = _torchrun(tmp_path, "--epochs", "1", "--steps", "5", "--checkpoint", ckpt,
                      "--split-log", logs[0])
    assert "epoch 0: split ok: 80 samples read, 80 distinct" in first, first
    again = _torchrun(tmp_path, "--epochs", "3", "--checkpoint", ckpt, "--resume", ckpt,
                      "--split-log", logs[1])
    assert again.count(f"resumed from {ckpt}: epoch 0 after 5 batches") == 2, again
    for rank in range(2):
        assert f"[rank {rank}] epoch 1: 7 batches, 56 images" in again, again
        assert f"[rank {rank}] epoch 2: 12 batches, 96 images" in again, again
    assert "epoch 1: split ok: 112 samples read, 112 distinct" in again, again
    assert "epoch 2: split ok: 192 samples read, 192 distinct" in again, again
    # The interrupted epoch: what the job read before the stop and after the
    # resume is the whole epoch, each sample once.
    before, after = ([json.loads(line)["indices"] for line in Path(path).read_text().splitlines()]
                     for path in logs)
    assert len(before) == 1 and len(after) == 2
    assert not set(before[0]) & set(after[0])
    assert sorted(before[0] + after[0]) == list(range(192))
