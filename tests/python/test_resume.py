"""Exact resume: Loader.state_dict() / load_state_dict() (pytest, CPU).

A loader is killed (SIGKILL) at step k of an epoch while another keeps reading
the same server; a new process loads its state (through torch.save /
torch.load) and reads on. Its batches before and after, together, must be the
uninterrupted run's byte for byte (the other loader, which joined at the same
seq with the same batch size, is that run), and the other loader's epochs stay
exact (every sample once, no skip). Also: the state in the last batch of an
epoch and right after its end, a group of two ranks restarted under a new group
name, a server restarted with the same options, a dataset of JPEGs (pixels
depend on the epoch), and every refusal of a wrong state (named, and the loader
stays usable where it was).

Run: BATCHCAST_BUILD_DIR=build /usr/bin/python3 -m pytest tests/python/test_resume.py -q
"""
import hashlib
import importlib.util
import multiprocessing
import os
import signal
import threading
import time

import pytest

import _bc_helpers as H

batchcast = H.require_batchcast()
import torch  # noqa: E402  (after the skip check)

SIZE, SAMPLES, BATCH = 8, 640, 16  # 40 batches per epoch
CTX = multiprocessing.get_context("spawn")


def digest(loader, images, labels):
    """(loader epoch, indices, sha1 of the batch's bytes) of the last batch."""
    h = hashlib.sha1(images.contiguous().numpy().tobytes())
    h.update(labels.contiguous().numpy().tobytes())
    return (loader.epoch, loader.indices.tolist(), h.hexdigest())


def loader_kwargs(group):
    return dict(group=group[0], rank=group[1], world_size=group[2]) if group else {}


def victim_main(name, batch, after, state_path, queue, group=None):
    """Reads `after` batches ("end": one whole epoch), saves its state with
    torch.save, reports its batches, and waits to be killed."""
    try:
        import batchcast

        batchcast.set_log_level("warn")
        loader = batchcast.Loader(name, batch_size=batch, timeout=60, **loader_kwargs(group))
        seen = []
        for images, labels in loader:
            seen.append(digest(loader, images, labels))
            if len(seen) == after:
                break  # inside the loop: before the epoch's end
        torch.save({"model": {"w": torch.zeros(2)}, "loader": loader.state_dict()}, state_path)
        queue.put(("saved", seen))
        time.sleep(600)
    except BaseException as e:  # reported to the parent
        queue.put(("error", repr(e)))


def resumer_main(name, batch, state_path, last_epoch, queue, group=None):
    """Loads the saved state and reads through its epoch `last_epoch`."""
    try:
        import batchcast

        batchcast.set_log_level("warn")
        loader = batchcast.Loader(name, batch_size=batch, timeout=60, **loader_kwargs(group))
        state = torch.load(state_path)["loader"]
        loader.load_state_dict(state)
        assert loader.epoch == state["epoch"]
        seen = []
        for _ in range(state["epoch"], last_epoch + 1):  # as a training loop resumes
            for images, labels in loader:
                seen.append(digest(loader, images, labels))
        queue.put(("done", seen, loader.state_dict()))
    except BaseException as e:  # reported to the parent
        import traceback

        queue.put(("error", f"{e!r}\n{traceback.format_exc()}"))


def read_in_thread(loader, epochs, out, pause=0.0):
    """Reads `epochs` epochs of `loader`, digesting every batch into `out`
    (an exception ends it and is appended)."""
    def run():
        try:
            for _ in range(epochs):
                for images, labels in loader:
                    out.append(digest(loader, images, labels))
                    if pause:
                        time.sleep(pause)
        except BaseException as e:  # noqa: BLE001  (checked by the test)
            out.append(e)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


# A process killed with SIGKILL may die holding its queue's write lock (its
# feeder thread between sending and releasing): the processes started after a
# kill report on a queue of their own.


def wait_for(queue, kind, timeout=60):
    msg = queue.get(timeout=timeout)
    assert msg[0] == kind, msg
    return msg


def kill(proc):
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)


def epochs_of(records):
    """{epoch: [indices of each batch]} of digests."""
    out = {}
    for epoch, indices, _ in records:
        out.setdefault(epoch, []).append(indices)
    return out


@pytest.mark.parametrize("after", [7, SAMPLES // BATCH, "end"],
                         ids=["mid_epoch", "last_batch", "after_epoch_end"])
def test_a_killed_loader_resumes_exactly_while_another_reads(tmp_path, after):
    name = H.unique_name("resume")
    state = str(tmp_path / "ckpt.pt")
    last_epoch = 6
    with batchcast.Server(synthetic=SAMPLES, size=SIZE, batch_size=BATCH, window=8,
                          min_consumers=2, name=name) as server:
        queue = CTX.Queue()
        victim = CTX.Process(target=victim_main, args=(name, BATCH, after, state, queue))
        victim.start()
        other = batchcast.Loader(name, batch_size=BATCH, timeout=60)  # the uninterrupted run
        seen_other = []
        reader = read_in_thread(other, 10, seen_other, pause=0.01)
        try:
            before = wait_for(queue, "saved")[1]
            if after == "end":
                # The state after the epoch's end: the loop ended, then saved.
                assert len(before) == SAMPLES // BATCH
            kill(victim)
            while len(seen_other) < 2 * SAMPLES // BATCH:  # the stream moves on
                time.sleep(0.05)
            results = CTX.Queue()
            resumer = CTX.Process(target=resumer_main,
                                  args=(name, BATCH, state, last_epoch, results))
            resumer.start()
            _, after_records, final = wait_for(results, "done", timeout=120)
            resumer.join(10)
            reader.join(120)
            lane = server.stats()["resume_lane"]
        finally:
            other.close()
    assert not any(isinstance(r, BaseException) for r in seen_other), seen_other[-1]
    # The victim's batches before and after are the uninterrupted run's, byte for byte.
    n = (last_epoch + 1) * SAMPLES // BATCH
    assert before + after_records == seen_other[:n]
    assert final["epoch"] == last_epoch + 1 and final["step"] == 0
    # The other loader's epochs stay exact: every sample once, nothing skipped.
    for epoch, batches in epochs_of(seen_other).items():
        flat = [i for b in batches for i in b]
        assert sorted(flat) == list(range(SAMPLES)), f"epoch {epoch} of the other loader"
    assert other.skipped == 0
    assert lane["owners"] >= 1, lane  # it caught up through the resume lane


def test_a_group_of_two_resumes_every_rank_at_its_saved_round(tmp_path, monkeypatch):
    monkeypatch.delenv("BATCHCAST_GROUP", raising=False)
    name = H.unique_name("rgroup")
    states = [str(tmp_path / f"rank{r}.pt") for r in range(2)]
    last_epoch = 3
    with batchcast.Server(synthetic=SAMPLES, size=SIZE, batch_size=BATCH, window=8,
                          min_consumers=3, name=name):
        queue = CTX.Queue()
        ranks = [CTX.Process(target=victim_main,
                             args=(name, BATCH, 9, states[r], queue, ("job", r, 2)))
                 for r in range(2)]
        for p in ranks:
            p.start()
        other = batchcast.Loader(name, batch_size=BATCH, timeout=60, group=False)
        seen_other = []
        reader = read_in_thread(other, 8, seen_other, pause=0.01)
        try:
            before = [wait_for(queue, "saved")[1] for _ in range(2)]
            for p in ranks:
                kill(p)
            while len(seen_other) < SAMPLES // BATCH:
                time.sleep(0.05)
            # torchrun restarts the job: a new group name; every rank loads
            # rank 0's checkpoint (the group's place).
            results = CTX.Queue()
            resumed = [CTX.Process(target=resumer_main,
                                   args=(name, BATCH, states[0], last_epoch, results,
                                         ("job-restart-1", r, 2)))
                       for r in range(2)]
            for p in resumed:
                p.start()
            after = [wait_for(results, "done", timeout=120) for _ in range(2)]
            for p in resumed:
                p.join(10)
            reader.join(120)
        finally:
            other.close()
    saved = [torch.load(p)["loader"] for p in states]
    assert {k: v for k, v in saved[0].items() if k not in ("rank", "check")} == \
        {k: v for k, v in saved[1].items() if k not in ("rank", "check")}
    # Rank r gets chunk k of each epoch for k = r mod 2: the uninterrupted
    # split of the other loader's batches, before the kill and after.
    ref = epochs_of(seen_other)
    got = {0: [], 1: []}
    for seen in before:
        got[0 if seen[0][1] == ref[0][0] else 1].extend(seen)
    for _, seen, final in after:
        assert final["world_size"] == 2 and final["epoch"] == last_epoch + 1
        # Its first batch after the resume is chunk 2 x 9 + r of epoch 0.
        got[0 if seen[0][1] == ref[0][18] else 1].extend(seen)
    for r in range(2):
        want = [b for e in range(last_epoch + 1) for b in ref[e][r::2]]
        assert [g[1] for g in got[r]] == want, f"rank {r}"
        assert [g[0] for g in got[r]] == [e for e in range(last_epoch + 1) for _ in range(20)]


def test_a_group_resumed_with_a_larger_batch_gets_the_rest_of_its_epoch(monkeypatch):
    """Two ranks read 9 rounds of batch 16 and save; a restarted group of
    batch 32 loads the state: each rank gets the rest of epoch 0 in batches of
    32, its batch count going on from 9, and the two runs together hold
    every sample of the epoch once but the dropped remainder (640 = 9 x 32 +
    5 x 64 + 32)."""
    monkeypatch.delenv("BATCHCAST_GROUP", raising=False)
    name = H.unique_name("rgbatch")

    def read(loaders, rounds=None):
        """Each loader's (step, indices) in threads: `rounds` batches, or to
        the end of its epoch."""
        out = [[] for _ in loaders]

        def run(loader, seen):
            for _, _ in loader:
                seen.append((loader.state_dict()["step"], loader.indices.tolist()))
                if rounds is not None and len(seen) == rounds:
                    break
        threads = [threading.Thread(target=run, args=(ld, seen), daemon=True)
                   for ld, seen in zip(loaders, out)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        return out

    with batchcast.Server(synthetic=SAMPLES, size=SIZE, batch_size=BATCH, window=8, name=name):
        first = [batchcast.Loader(name, batch_size=BATCH, timeout=60, group="job", rank=r,
                                  world_size=2) for r in range(2)]
        before = read(first, rounds=9)
        state = first[0].state_dict()
        assert state["batch_size"] == BATCH and state["step"] == 9
        for loader in first:
            loader.close()
        again = [batchcast.Loader(name, batch_size=2 * BATCH, timeout=60, group="job-restart-1",
                                  rank=r, world_size=2) for r in range(2)]
        for loader in again:
            loader.load_state_dict(state)
        after = read(again)
        for loader in again:
            loader.close()
    for r in range(2):
        assert [len(i) for _, i in after[r]] == [2 * BATCH] * 5, f"rank {r}"
        assert [step for step, _ in after[r]] == list(range(10, 15))
    samples = [x for runs in (before, after) for seen in runs for _, i in seen for x in i]
    assert len(samples) == len(set(samples)) == SAMPLES - 2 * BATCH


def test_a_server_restarted_with_the_same_options_continues_exactly(tmp_path):
    H.require_server()
    name = H.unique_name("rserver")
    state = str(tmp_path / "ckpt.pt")
    args = ("--synthetic", SAMPLES, "--size", SIZE, "--batch-size", BATCH, "--window", 8)
    queue = CTX.Queue()
    with H.server_process(name, *args) as server:
        victim = CTX.Process(target=victim_main, args=(name, BATCH, 13, state, queue))
        victim.start()
        before = wait_for(queue, "saved")[1]
        server.kill()  # the whole node is preempted
        server.wait()
        kill(victim)
    # The reference: an uninterrupted run of a server with the same options.
    ref_name = H.unique_name("rref")
    with batchcast.Server(synthetic=SAMPLES, size=SIZE, batch_size=BATCH, window=8,
                          name=ref_name):
        with batchcast.Loader(ref_name, batch_size=BATCH, timeout=60) as ref_loader:
            reference = []
            read_in_thread(ref_loader, 3, reference).join(60)
    with H.server_process(name, *args):
        results = CTX.Queue()
        resumer = CTX.Process(target=resumer_main, args=(name, BATCH, state, 2, results))
        resumer.start()
        _, after, _ = wait_for(results, "done", timeout=120)
        resumer.join(10)
        stats = batchcast.query_stats(name)
    assert before + after == reference
    assert stats["stream_moves"] >= 1  # its stream went to where the job resumed


def test_a_dataset_of_jpegs_resumes_with_the_same_pixels(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "make_dataset_for_resume", os.path.join(H.REPO, "tools", "make_dataset.py"))
    md = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(md)
    data = tmp_path / "data"
    md.make_dataset(data, classes=2, per_class=24, seed=3, workers=1)
    name = H.unique_name("rjpeg")
    state = str(tmp_path / "ckpt.pt")
    with batchcast.Server(str(data), size=16, batch_size=4, window=4, min_consumers=2,
                          workers=1, name=name):
        queue = CTX.Queue()
        victim = CTX.Process(target=victim_main, args=(name, 4, 5, state, queue))
        victim.start()
        other = batchcast.Loader(name, batch_size=4, timeout=60)
        seen_other = []
        reader = read_in_thread(other, 8, seen_other, pause=0.02)
        try:
            before = wait_for(queue, "saved")[1]
            kill(victim)
            while len(seen_other) < 24:
                time.sleep(0.05)
            results = CTX.Queue()
            resumer = CTX.Process(target=resumer_main, args=(name, 4, state, 2, results))
            resumer.start()
            _, after, _ = wait_for(results, "done", timeout=120)
            resumer.join(10)
            reader.join(120)
        finally:
            other.close()
    # 48 images, 12 batches an epoch: crops differ by epoch, pixels agree.
    assert before + after == seen_other[:36]
    # Another transform is another stream.
    with batchcast.Server(str(data), size=16, batch_size=4, window=4, transform="eval",
                          workers=1, name=H.unique_name("reval")) as s2:
        with batchcast.Loader(s2.name, batch_size=4, timeout=30) as loader:
            with pytest.raises(batchcast.InvalidArgument,
                               match="transform: saved train, here eval"):
                loader.load_state_dict(torch.load(state)["loader"])


@pytest.fixture
def two_servers():
    with batchcast.Server(synthetic=SAMPLES, size=SIZE, batch_size=BATCH, window=8,
                          name=H.unique_name("rw0")) as a, \
            batchcast.Server(synthetic=SAMPLES, size=SIZE, batch_size=BATCH, window=8, seed=1,
                             name=H.unique_name("rw1")) as b:
        yield a, b


def test_wrong_states_are_refused_naming_what_differs(two_servers, monkeypatch):
    a, b = two_servers
    with batchcast.Loader(a.name, batch_size=BATCH, timeout=30) as saver:
        for _ in range(3):
            next(iter(saver))
        state = saver.state_dict()
    assert set(state) == {"format", "stream", "epoch", "step", "epoch_start", "next_seq",
                          "skipped", "batch_size", "world_size", "rank", "check"}
    assert (state["epoch"], state["step"], state["next_seq"]) == (0, 3, 3 * BATCH)

    def refused(server, bad, match, **kwargs):
        with batchcast.Loader(server.name, batch_size=BATCH, timeout=30, **kwargs) as loader:
            with pytest.raises(batchcast.InvalidArgument, match=match):
                loader.load_state_dict(bad)
            # Nothing moved: it reads from its own join point.
            next(iter(loader))
            assert loader.indices is not None

    refused(b, state, r"seed: saved 0, here 1")
    for key, value, match in [("next_seq", state["next_seq"] + 1, "corrupt"),
                              ("format", 2, "newer than this batchcast"),
                              ("epoch", "3", "'epoch' must be an int"),
                              ("step", True, "'step' must be an int")]:
        refused(a, {**state, key: value}, match)
    truncated = dict(state)
    del truncated["next_seq"]
    refused(a, truncated, "no next_seq")
    refused(a, [1, 2], "expected a dict")
    refused(a, {**state, "stream": "source=synthetic"}, "corrupt")
    monkeypatch.delenv("BATCHCAST_GROUP", raising=False)
    with batchcast.Server(synthetic=SAMPLES, size=SIZE, batch_size=BATCH, window=8,
                          num_shards=2, name=H.unique_name("rw2")) as c:
        refused(c, state, r"shard: saved 0/1, here 0/2")
    # A late call.
    with batchcast.Loader(a.name, batch_size=BATCH, timeout=30) as loader:
        next(iter(loader))
        with pytest.raises(batchcast.InvalidArgument, match="before its first batch"):
            loader.load_state_dict(state)


def test_state_of_a_group_needs_the_same_world_size(tmp_path, monkeypatch):
    monkeypatch.delenv("BATCHCAST_GROUP", raising=False)
    with batchcast.Server(synthetic=SAMPLES, size=SIZE, batch_size=BATCH, window=8,
                          name=H.unique_name("rws")) as server:
        with batchcast.Loader(server.name, batch_size=BATCH, timeout=30) as plain:
            state = plain.state_dict()
        with batchcast.Loader(server.name, batch_size=BATCH, timeout=30, group="g", rank=0,
                              world_size=1) as ranked:
            with pytest.raises(batchcast.InvalidArgument,
                               match="a consumer without a group; this consumer is a rank"):
                ranked.load_state_dict(state)
        with batchcast.Loader(server.name, batch_size=BATCH, timeout=30, group="g2", rank=0,
                              world_size=2) as of_two:
            state_of_two = of_two.state_dict()
        assert state_of_two["world_size"] == 2
        with batchcast.Loader(server.name, batch_size=BATCH, timeout=30, group="g1", rank=0,
                              world_size=1) as ranked:
            with pytest.raises(batchcast.InvalidArgument,
                               match="saved by a rank of a group of 2; this consumer is a rank "
                                     "of a group of 1"):
                ranked.load_state_dict(state_of_two)


def test_the_example_saves_the_loader_with_the_model_and_resumes_there(tmp_path):
    """examples/train_resnet.py --checkpoint / --resume with its in-process
    server (restarted with the process): 16 batches an epoch, the first run
    stops after 7, the resumed one reads the other 9 of that epoch."""
    import subprocess
    import sys

    example = os.path.join(H.REPO, "examples", "train_resnet.py")
    ckpt = str(tmp_path / "ckpt.pt")
    common = [sys.executable, example, "--synthetic", "256", "--size", "16", "--batch-size", "16",
              "--num-classes", "10", "--checkpoint", ckpt]
    env = H.python_env()
    env["OMP_NUM_THREADS"] = "1"
    first = subprocess.run(common + ["--epochs", "1", "--steps", "7"], env=env,
                           capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "epoch 0: 7 steps" in first.stdout, first.stdout
    again = subprocess.run(common + ["--epochs", "2", "--resume", ckpt], env=env,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"resumed from {ckpt}: epoch 0 after 7 batches" in again.stdout, again.stdout
    assert "epoch 1: 9 steps" in again.stdout, again.stdout
    # Resumed once more with every epoch done: it says so, and trains nothing.
    done = subprocess.run(common + ["--epochs", "2", "--resume", ckpt], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "holds 2 finished epoch(s): --epochs 2 leaves nothing to train" in done.stdout, \
        done.stdout
    assert "steps," not in done.stdout, done.stdout
