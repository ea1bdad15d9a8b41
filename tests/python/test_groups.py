"""Consumer groups from Python: batchcast.Loader(group=, rank=, world_size=) and
their defaults from torchrun's and SLURM's variables (pytest, CPU).

Checks: a group of two Loaders splits each epoch (disjoint halves, equal
batch counts, together every sample once minus the remainder); the group
and rank come from the launcher's variables unless given, explicit
arguments win, group=False / BATCHCAST_GROUP=none opt out, a single local
rank is no group; wrong values are InvalidArgument naming them; a rank that
leaves makes its peer fail (Cancelled) instead of hanging.
"""
import threading

import pytest

import _bc_helpers as H

batchcast = H.require_batchcast()

LAUNCHER_VARIABLES = ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID", "MASTER_ADDR",
                      "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT", "SLURM_LOCALID",
                      "SLURM_NTASKS_PER_NODE", "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_NODEID",
                      "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "BATCHCAST_GROUP")


@pytest.fixture
def clean_env(monkeypatch):
    """No launcher variables (whatever runs the tests); tests set their own."""
    for v in LAUNCHER_VARIABLES:
        monkeypatch.delenv(v, raising=False)
    return monkeypatch


@pytest.fixture
def server():
    with batchcast.Server(synthetic=600, size=8, name=H.unique_name("grp"), batch_size=32,
                          window=8, epochs=2) as s:
        yield s


def _read_epoch(loader, out):
    try:
        out.append([int(i) for _ in loader for i in loader.indices])
    except Exception as e:  # noqa: BLE001  (reported by the main thread)
        out.append(e)


def test_a_group_of_two_splits_each_epoch(server, clean_env):
    loaders = [batchcast.Loader(server.name, batch_size=20, join="next_epoch", group="job",
                                rank=r, world_size=2, timeout=30) for r in range(2)]
    try:
        assert [(ld.group, ld.rank, ld.world_size) for ld in loaders] == [
            ("job", 0, 2), ("job", 1, 2)]
        assert [len(ld) for ld in loaders] == [15, 15]  # 600 / (2 x 20)
        for epoch in range(2):
            got = [[], []]
            threads = [threading.Thread(target=_read_epoch, args=(ld, g))
                       for ld, g in zip(loaders, got)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            halves = [g[0] for g in got]
            for h in halves:
                assert not isinstance(h, Exception), h
            assert [len(h) for h in halves] == [300, 300], epoch
            assert not set(halves[0]) & set(halves[1]), (
                f"a sample went to both ranks in epoch {epoch}")
            assert set(halves[0]) | set(halves[1]) == set(range(600)), epoch
        assert "group='job', rank=1, world_size=2" in repr(loaders[1])
    finally:
        for ld in loaders:
            ld.close()


def test_defaults_from_torchrun_and_slurm_explicit_arguments_win(server, clean_env):
    env = clean_env
    env.setenv("LOCAL_RANK", "1")
    env.setenv("LOCAL_WORLD_SIZE", "2")
    env.setenv("TORCHELASTIC_RUN_ID", "pyt")

    def membership(**kwargs):
        with batchcast.Loader(server.name, batch_size=16, **kwargs) as ld:
            return ld.group, ld.rank, ld.world_size, len(ld)

    assert membership() == ("torchrun:pyt:0", 1, 2, 18)  # 600 / 32
    assert membership(rank=0) == ("torchrun:pyt:0", 0, 2, 18)
    assert membership(group="mine") == ("mine", 1, 2, 18)
    assert membership(group="four", rank=3, world_size=4) == ("four", 3, 4, 9)
    assert membership(group=False) == (None, None, None, 37)
    assert membership(group="") == (None, None, None, 37)
    env.setenv("BATCHCAST_GROUP", "none")
    assert membership() == (None, None, None, 37)
    env.delenv("BATCHCAST_GROUP")
    env.setenv("LOCAL_WORLD_SIZE", "1")
    env.setenv("LOCAL_RANK", "0")
    assert membership() == (None, None, None, 37)  # one local rank: the whole stream

    for v in ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID"):
        env.delenv(v)
    env.setenv("SLURM_LOCALID", "0")
    env.setenv("SLURM_NTASKS_PER_NODE", "2")
    env.setenv("SLURM_JOB_ID", "9")
    env.setenv("SLURM_STEP_ID", "3")
    assert membership() == ("slurm:9.3", 0, 2, 18)


def test_wrong_group_arguments_name_them(server, clean_env):
    def refused(**kwargs):
        with pytest.raises(batchcast.InvalidArgument) as e:
            batchcast.Loader(server.name, batch_size=16, **kwargs)
        return str(e.value)

    assert "group must be" in refused(group=3)
    assert "group must be" in refused(group="x" * 300)
    assert "rank must be" in refused(group="g", rank=-1, world_size=2)
    assert "world_size must be" in refused(group="g", rank=0, world_size=0)
    assert "not below world_size" in refused(group="g", rank=2, world_size=2)
    assert "need a group name" in refused(rank=0, world_size=2)  # no launcher here
    assert "needs rank and world_size" in refused(group="g")
    assert "drop_last" in refused(group="g", rank=0, world_size=2, drop_last=False)
    clean_env.setenv("LOCAL_RANK", "one")
    assert "LOCAL_RANK" in refused()


def test_a_rank_that_leaves_cancels_its_peer(server, clean_env):
    r0 = batchcast.Loader(server.name, batch_size=16, group="job", rank=0, world_size=2,
                          timeout=30)
    r1 = batchcast.Loader(server.name, batch_size=16, group="job", rank=1, world_size=2,
                          timeout=30)
    it0, it1 = iter(r0), iter(r1)
    for _ in range(2):
        next(it0)
        next(it1)
    r1.close()
    with pytest.raises(batchcast.Cancelled, match="group 'job' is broken: rank 1"):
        for _ in range(100):
            next(it0)
    r0.close()
    # The group ended: a new one of that name may form (a restarted job).
    with batchcast.Loader(server.name, batch_size=16, group="job", rank=0, world_size=1) as again:
        assert again.group == "job"
        assert len(again) == 37
