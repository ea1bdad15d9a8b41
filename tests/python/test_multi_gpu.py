"""Several GPUs of one node, with torch: a Loader
whose current device is not the ring's gets every batch size right, and a
server with a ring per GPU serves each Loader from its own GPU's ring.
Contents are checked against the synthetic formula (the CPU reference).

Needs 2 GPUs and a CUDA build (skipped otherwise: "needs 2 GPUs").
"""
import pytest

import _bc_helpers as H

batchcast = H.require_batchcast()
import torch  # noqa: E402

if torch.cuda.device_count() < 2:
    pytest.skip("needs 2 GPUs", allow_module_level=True)

SIZE = 16


def _server(name, device):
    H.require_server()
    return H.server_process(name, "--synthetic", 1000, "--size", SIZE, "--batch-size", 64,
                            "--window", 8, "--device", device, timeout=60)


def _read(loader, batches, ring, also_on=None):
    """Reads `batches` batches, checking device and contents; returns how many
    were gathered (not zero-copy)."""
    gathered = 0
    for _, (images, labels) in zip(range(batches), H.endless(loader)):
        assert images.device == torch.device(ring), images.device
        assert labels.device == torch.device(ring)
        gathered += not loader.zero_copy
        idx = loader.indices.numpy().copy()
        H.check_synthetic_batch(images, labels, idx, SIZE)
        if also_on is not None:  # what a trainer on another GPU does with it
            moved = images.to(also_on, non_blocking=True)
            assert moved.device == torch.device(also_on)
            H.check_synthetic_batch(moved, labels, idx, SIZE)
    return gathered


def test_loader_on_another_gpu_gets_every_batch_size():
    name = H.unique_name("xgpu")
    with _server(name, "cuda:0"):
        with torch.cuda.device(1):
            for batch in (1, 50, 64, 100):
                with batchcast.Loader(name, batch_size=batch, timeout=30) as loader:
                    assert loader.ring_device == "cuda:0"
                    gathered = _read(loader, 8, "cuda:0", also_on="cuda:1")
                    if 64 % batch:
                        assert gathered > 0
                assert torch.cuda.current_device() == 1


def test_two_gpu_server_serves_each_loader_from_its_own_gpu():
    name = H.unique_name("twogpu")
    with _server(name, "cuda:0,1"):
        stats = batchcast.query_stats(name)
        assert stats["device"] == "cuda:0,1"
        l0 = batchcast.Loader(name, batch_size=50, timeout=30, device="cuda:0")
        l1 = batchcast.Loader(name, batch_size=50, timeout=30, device=torch.device("cuda", 1))
        assert (l0.ring_device, l1.ring_device) == ("cuda:0", "cuda:1")
        _read(l0, 10, "cuda:0")
        _read(l1, 10, "cuda:1")
        l0.close()
        l1.close()
        # Without device=: torch's current device picks the ring.
        with torch.cuda.device(1):
            with batchcast.Loader(name, batch_size=64, timeout=30) as loader:
                assert loader.ring_device == "cuda:1"
                _read(loader, 4, "cuda:1")
        rings = batchcast.query_stats(name)["rings"]
        assert [r["device"] for r in rings] == ["cuda:0", "cuda:1"]
        assert all(r["batches_written"] > 0 for r in rings)


def _epoch_on_two_gpus(name, produce):
    """One epoch read by a Loader per GPU (each the whole stream); the one on
    cuda:1 decodes its ring when `produce`. {index: image on the host} of
    each, and the stats."""
    # cuda:1's first: it holds its ring before the second Loader starts the
    # stream (--min-consumers 2).
    loaders = [batchcast.Loader(name, batch_size=16, join="next_epoch", timeout=60,
                                device=f"cuda:{i}", produce=produce and i == 1)
               for i in (1, 0)][::-1]
    assert loaders[1].producing == produce
    seen = [{}, {}]
    for i, loader in enumerate(loaders):
        for images, _ in loader:
            for k, index in enumerate(loader.indices.tolist()):
                seen[i][index] = images[k].cpu()
    stats = batchcast.query_stats(name)
    for loader in loaders:
        loader.close()
    return seen, stats


def test_a_trainer_decodes_its_gpus_ring_exactly_as_the_server(tmp_path):
    """Loader(produce=True) on cuda:1: GPU 1's share of the stream is decoded
    (nvJPEG) in this process, into the server's ring through CUDA IPC; both
    GPUs read the same bytes as from the server's own decode."""
    import os
    import sys
    sys.path.insert(0, os.path.join(H.REPO, "tools"))
    from dataset_maker.folder import make_dataset
    data = tmp_path / "data"
    make_dataset(data, classes=2, per_class=32, seed=3, workers=1)
    H.require_server()
    got = {}
    for produce in (False, True):
        name = H.unique_name("gpuproduce")
        with H.server_process(name, data, "--size", 64, "--batch-size", 16, "--seed", 5,
                              "--epochs", 1, "--device", "cuda:0,1", "--placement",
                              "round-robin", "--dtype", "float16", "--min-consumers", 2,
                              timeout=60):
            got[produce] = _epoch_on_two_gpus(name, produce)
    (plain, _), (held, stats) = got[False], got[True]
    ring1 = stats["rings"][1]
    assert ring1["attached_pid"] == os.getpid()
    assert ring1["attached_batches"] == ring1["batches_written"] == 2  # half of 4, in turn
    for i in range(2):
        assert sorted(held[i]) == sorted(plain[i]) == list(range(64))
        for index, image in plain[i].items():
            assert torch.equal(held[i][index], image), f"cuda:{i} sample {index}"


def test_a_loader_on_a_gpu_without_a_ring_may_not_decode_another_gpus():
    """produce=True on cuda:1 against a server with a cuda:0 ring only: the
    process would decode on a GPU it does not train on."""
    name = H.unique_name("xproduce")
    with _server(name, "cuda:0"):
        with pytest.raises(batchcast.InvalidArgument, match="served by the ring on cuda:0"):
            batchcast.Loader(name, batch_size=64, device="cuda:1", produce=True)
