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
