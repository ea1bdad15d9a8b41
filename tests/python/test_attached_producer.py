"""Loader(produce=True): the training process decodes its loader's ring (an
attached producer, docs/semantics.md "Attached producers"). On a host ring
here: the batches are exactly the server's (synthetic formula; decoded JPEGs
byte for byte against the same server without the attached producer), the
stats name this process as the ring's producer, and the server decodes the
ring again after close() or the producer process's death, losing nothing.
"""
import os
import signal
import subprocess
import sys
import time
import traceback

import numpy as np
import pytest

import _bc_helpers as H

batchcast = H.require_batchcast()
H.require_server()
import torch  # noqa: E402

sys.path.insert(0, os.path.join(H.REPO, "tools"))
from dataset_maker.folder import make_dataset  # noqa: E402


def ring0(name):
    return batchcast.query_stats(name)["rings"][0]


def test_a_producing_loader_reads_what_the_server_would_write():
    name = H.unique_name("produce")
    with H.server_process(name, "--synthetic", 640, "--size", 8, "--batch-size", 32,
                          "--epochs", 3):  # the third keeps the server up after close()
        loader = batchcast.Loader(name, batch_size=48, produce=True, timeout=30)
        assert loader.producing and loader.producer_error is None
        for _ in range(2):
            seen = []
            for images, labels in loader:
                H.check_synthetic_batch(images, labels, loader.indices, 8)
                seen.extend(loader.indices.tolist())
            assert len(seen) == 624 and len(set(seen)) == 624  # 13 whole batches of 48
        ring = ring0(name)
        mine = loader.stats()["loader"]
        # Read after the server's: it may have written more meanwhile.
        assert mine["producing"] and mine["produced_batches"] >= ring["attached_batches"] > 0
        assert mine["produced_samples"] == 32 * mine["produced_batches"]
        assert ring["attached_pid"] == os.getpid()
        # The server wrote what the stream needed before the producer attached.
        assert 0 < ring["attached_batches"] <= ring["batches_written"]
        assert ring["batches_written"] - ring["attached_batches"] <= 8
        loader.close()
        assert not loader.producing
        deadline = time.monotonic() + 5
        while ring0(name)["attached_pid"] != 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ring0(name)["attached_pid"] == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_a_loader_on_a_gpu_decodes_a_host_ring():
    """A host ring is decoded on the CPU: a Loader on a GPU may produce it."""
    name = H.unique_name("producegpu")
    with H.server_process(name, "--synthetic", 256, "--size", 8, "--batch-size", 32):
        loader = batchcast.Loader(name, batch_size=32, produce=True, device="cuda:0",
                                  timeout=30)
        images, labels = next(iter(loader))
        assert loader.producing and loader.ring_device == "cpu"
        H.check_synthetic_batch(images, labels, loader.indices, 8)
        loader.close()


def test_a_refused_loader_still_shows_in_a_traceback():
    """A Loader whose produce=True was refused raised in __init__; a
    traceback's repr of it names it instead of raising AttributeError."""
    name = H.unique_name("producerepr")
    with H.server_process(name, "--synthetic", 64, "--size", 8, "--no-attach"):
        try:
            batchcast.Loader(name, produce=True)
        except batchcast.NotFound as e:
            frames = [f for f, _ in traceback.walk_tb(e.__traceback__)]
        loader = next(f.f_locals["self"] for f in frames
                      if isinstance(f.f_locals.get("self"), batchcast.Loader))
        assert repr(loader) == f"batchcast.Loader({name!r}, not opened)"


def test_produce_refusals_are_errors_at_once():
    name = H.unique_name("produceno")
    with H.server_process(name, "--synthetic", 640, "--size", 8):
        with pytest.raises(batchcast.InvalidArgument, match="produce"):
            batchcast.Loader(name, produce="yes")
        first = batchcast.Loader(name, produce=True)
        with pytest.raises(batchcast.ResourceExhausted, match="already has an attached producer"):
            batchcast.Loader(name, produce=True)
        first.close()
    name = H.unique_name("noattach")
    with H.server_process(name, "--synthetic", 640, "--size", 8, "--no-attach"):
        with pytest.raises(batchcast.NotFound, match="--no-attach"):
            batchcast.Loader(name, produce=True)


PRODUCER = r"""
import sys, time
import batchcast
loader = batchcast.Loader(sys.argv[1], batch_size=32, produce=True)
print("PRODUCING", flush=True)
for _ in loader:  # holds the ring while it reads, slowly
    time.sleep(0.01)
time.sleep(600)
"""


def test_a_killed_producer_loses_nothing(tmp_path):
    name = H.unique_name("producekill")
    script = tmp_path / "producer.py"
    script.write_text(PRODUCER)
    with H.server_process(name, "--synthetic", 640, "--size", 8, "--batch-size", 32,
                          "--epochs", 3, "--min-consumers", 2):
        proc = subprocess.Popen([sys.executable, str(script), name], env=H.python_env(),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            lines = []
            while not lines or lines[-1] not in ("PRODUCING", ""):
                lines.append(proc.stdout.readline().strip())
            assert lines[-1] == "PRODUCING", lines
            loader = batchcast.Loader(name, batch_size=64, join="next_epoch", timeout=30)
            epochs = []
            for epoch in range(3):
                seen = []
                for images, labels in loader:
                    H.check_synthetic_batch(images, labels,
                                            loader.indices, 8)
                    seen.extend(loader.indices.tolist())
                    if epoch == 0 and len(seen) == 128:
                        assert ring0(name)["attached_batches"] > 0
                        proc.send_signal(signal.SIGKILL)
                epochs.append(seen)
            for seen in epochs:
                assert sorted(seen) == list(range(640))
            ring = ring0(name)
            assert ring["attached_pid"] == 0 and ring["attached_detached"] == 1
        finally:
            proc.kill()
            proc.wait()


def epoch_of_images(name, produce):
    loader = batchcast.Loader(name, batch_size=8, join="next_epoch", produce=produce, timeout=60)
    out = {}
    for images, _ in loader:
        for i, index in enumerate(loader.indices.tolist()):
            out[index] = images[i].numpy().copy()
    loader.close()
    return out


def test_decoded_images_are_the_servers_byte_for_byte(tmp_path):
    data = tmp_path / "data"
    make_dataset(data, classes=2, per_class=12, seed=3, workers=1)
    got = {}
    for produce in (False, True):
        name = H.unique_name("producejpeg")
        with H.server_process(name, data, "--size", 32, "--batch-size", 8,
                              "--seed", 5, "--epochs", 1, "--dtype", "float16"):
            got[produce] = epoch_of_images(name, produce)
    assert sorted(got[True]) == sorted(got[False]) == list(range(24))
    for index, image in got[False].items():
        np.testing.assert_array_equal(got[True][index], image, err_msg=f"sample {index}")


def test_a_server_given_a_relative_path_is_joined_from_anywhere(tmp_path, monkeypatch):
    """The server's dataset path is relative to its own working directory;
    the producing Loader runs elsewhere and still finds the dataset."""
    make_dataset(tmp_path / "data", classes=2, per_class=4, seed=3, workers=1)
    name = H.unique_name("producerel")
    here = os.getcwd()
    monkeypatch.chdir(tmp_path)
    with H.server_process(name, "data", "--size", 16, "--batch-size", 4, "--epochs", 1):
        monkeypatch.chdir(here)
        loader = batchcast.Loader(name, batch_size=4, produce=True, timeout=30)
        assert loader.producing
        assert len([i for _ in loader for i in loader.indices.tolist()]) == 8
        loader.close()


def runtime_dir():
    """Where servers keep their sockets and saved listings (core/src/runtime_dir.h)."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    return os.path.join(xdg, "batchcast") if xdg else f"/tmp/batchcast-{os.getuid()}"


def test_a_producing_loader_reads_the_servers_listing_not_the_folder(tmp_path):
    """The producer opens the dataset from the scan the server saved at the
    first attach: a file renamed after the server listed it is still the
    server's sample 0, which fails to read for both and is dropped (a hole,
    docs/semantics.md "Bad input"), never replaced or refused."""
    data = tmp_path / "data"
    make_dataset(data, classes=2, per_class=4, seed=3, workers=1)
    name = H.unique_name("producelisting")
    listing = os.path.join(runtime_dir(), name + ".listing")
    with H.server_process(name, data, "--size", 16, "--batch-size", 4):
        victim = sorted((data / sorted(os.listdir(data))[0]).iterdir())[0]  # sample 0
        victim.rename(victim.with_name("renamed-" + victim.name))
        assert not os.path.exists(listing)  # saved when a producer first attaches
        loader = batchcast.Loader(name, batch_size=4, produce=True, timeout=30,
                                  drop_last=False)
        assert loader.producing and os.path.exists(listing)
        assert os.stat(listing).st_mode & 0o777 == 0o600
        seen = [i for _ in loader for i in loader.indices.tolist()]
        assert sorted(seen) == list(range(1, 8)), seen
        assert loader.producing, loader.producer_error
        loader.close()
        # Removed meanwhile (a cleaner of old files): saved again for the next.
        os.remove(listing)
        again = batchcast.Loader(name, batch_size=4, produce=True, timeout=30)
        assert again.producing and os.path.exists(listing)
        again.close()
    assert not os.path.exists(listing)  # removed when the server stops


def test_what_a_producing_loader_drops_the_server_counts(tmp_path):
    """A file that fails in the producing process is dropped there and
    counted by the server as its own drops would be (the ring's dataset
    counters, Prometheus), and known bad to the server from then on."""
    data = tmp_path / "data"
    make_dataset(data, classes=2, per_class=4, seed=3, workers=1)
    name = H.unique_name("producedrops")
    with H.server_process(name, data, "--size", 16, "--batch-size", 4, "--window", 2):
        loader = batchcast.Loader(name, batch_size=4, produce=True, timeout=30,
                                  drop_last=False)
        batches = H.endless(loader)
        # Until the producing process writes (the server wrote the slots
        # before it attached), then sample 0's file goes.
        while ring0(name)["attached_batches"] < 2:
            next(batches)
        victim = sorted((data / sorted(os.listdir(data))[0]).iterdir())[0]
        victim.rename(victim.with_name("renamed-" + victim.name))
        deadline = time.monotonic() + 20
        while ring0(name)["source_counters"]["files_dropped_at_decode"] == 0:
            assert time.monotonic() < deadline, ring0(name)
            next(batches)
        counters = ring0(name)["source_counters"]
        assert counters["files_dropped_at_decode"] == 1, counters
        assert counters["samples_dropped"] >= 1, counters
        assert loader.producing, loader.producer_error
        assert ring0(name)["attached_detached"] == 0
        loader.close()


def test_without_a_saved_listing_a_changed_dataset_is_refused(tmp_path):
    """Where the server cannot save its listing (here a directory is in the
    way), the producer scans the dataset itself and refuses one that
    changed since the server listed it."""
    data = tmp_path / "data"
    make_dataset(data, classes=2, per_class=4, seed=3, workers=1)
    name = H.unique_name("producechanged")
    blocker = os.path.join(runtime_dir(), name + ".listing")
    os.makedirs(blocker)
    try:
        with H.server_process(name, data, "--size", 16, "--batch-size", 4):
            victim = sorted((data / sorted(os.listdir(data))[0]).iterdir())[0]
            victim.rename(victim.with_name("renamed-" + victim.name))
            with pytest.raises(batchcast.InvalidArgument,
                               match="not the server's .the same number of samples, other files"):
                batchcast.Loader(name, batch_size=4, produce=True)
    finally:
        os.rmdir(blocker)
