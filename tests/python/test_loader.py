"""batchcast.Loader and batchcast.Server (pytest, CPU).

Run: BATCHCAST_BUILD_DIR=build-py /usr/bin/python3 -m pytest tests/python -q
Skips when the extension or the server binary is not built (see _bc_helpers.py).
"""
import gc
import multiprocessing
import os
import signal
import threading
import time

import pytest

import _bc_helpers as H

batchcast = H.require_batchcast()
import torch  # noqa: E402  (after the skip check)
from batchcast import _core  # noqa: E402

SIZE = 16
SERVE_ARGS = ("--synthetic", 1000, "--size", SIZE, "--batch-size", 64, "--window", 4,
              "--min-consumers", 3, "--epochs", 2)


# ---- several processes ------------------------------------------------------


def test_exactly_once_per_epoch_three_loaders_in_processes():
    H.require_server()
    name = H.unique_name("once")
    ctx = multiprocessing.get_context("spawn")
    # (batch size, drop_last): 1000 samples = 31x32 (+8 dropped), 20x48 + 40, 10x100.
    specs = {"b32": (32, True), "b48": (48, False), "b100": (100, True)}
    with H.server_process(name, *SERVE_ARGS):
        queue = ctx.Queue()
        procs = {
            tag: ctx.Process(target=H.consumer_main,
                             args=(tag, name, b, dl, "next_epoch", SIZE, 2, queue))
            for tag, (b, dl) in specs.items()
        }
        with H.running(procs):
            messages = H.collect(queue, procs, timeout=50)
    orders = {}
    for tag, (b, drop_last) in specs.items():
        msgs = messages[tag]
        errors = [m for m in msgs if m[0] == "error"]
        assert not errors, f"{tag}: {errors[0][1]}"
        epochs = [m for m in msgs if m[0] == "epoch"]
        assert [m[1] for m in epochs] == [0, 1], tag
        for _, epoch, length, batches, indices in epochs:
            # len() is the number of batches one loop yields.
            assert length == batches, (tag, epoch, length, batches)
            assert batches == (1000 // b if drop_last else -(-1000 // b)), (tag, batches)
            # Every index at most once; all of them unless the remainder was dropped.
            assert len(indices) == len(set(indices)), f"{tag}: a sample came twice in epoch {epoch}"
            assert set(indices) <= set(range(1000))
            if drop_last:
                assert len(indices) == batches * b
            else:
                assert sorted(indices) == list(range(1000)), f"{tag}: epoch {epoch} is not exact"
            orders[(tag, epoch)] = indices
        final = msgs[-1]
        assert final[0] == "end" and "stream has ended" in final[1], final
    # join=next_epoch: every consumer epoch is one producer epoch, in the producer's order.
    for epoch in (0, 1):
        full = orders[("b48", epoch)]
        assert orders[("b100", epoch)] == full
        assert orders[("b32", epoch)] == full[:992]
    assert orders[("b48", 0)] != orders[("b48", 1)], "producer epochs should be reshuffled"


def test_killed_loader_does_not_stop_the_others():
    H.require_server()
    name = H.unique_name("kill")
    ctx = multiprocessing.get_context("spawn")
    with H.server_process(name, *SERVE_ARGS, log_level="info") as server_proc:
        queue = ctx.Queue()
        procs = {
            # The victim holds the tensors of 3 batches (3 of the 4 ring slots) and
            # sleeps, so that the producer is blocked on it when it dies.
            "victim": ctx.Process(target=H.consumer_main,
                                  args=("victim", name, 64, True, "next_epoch", SIZE, 2, queue, 3)),
            "a": ctx.Process(target=H.consumer_main,
                             args=("a", name, 64, True, "next_epoch", SIZE, 2, queue)),
            "b": ctx.Process(target=H.consumer_main,
                             args=("b", name, 50, True, "next_epoch", SIZE, 2, queue)),
        }
        with H.running(procs):
            H.collect(queue, procs, timeout=40,
                      until=lambda m: any(x[0] == "holding" for x in m["victim"])
                      or any(x[0] == "error" for x in m["victim"]))
            time.sleep(0.3)  # the others are now paced by (blocked on) the victim
            stats = batchcast.query_stats(name)
            assert len(stats["consumers"]) == 3
            os.kill(procs["victim"].pid, signal.SIGKILL)
            t0 = time.monotonic()
            messages = H.collect(queue, {t: procs[t] for t in ("a", "b")}, timeout=30)
            recovery = time.monotonic() - t0
    assert procs["victim"].exitcode == -signal.SIGKILL
    victim_pid = procs["victim"].pid
    assert f"(pid {victim_pid}) removed" in server_proc.output, server_proc.output
    for tag, b in (("a", 64), ("b", 50)):
        msgs = messages[tag]
        assert not [m for m in msgs if m[0] == "error"], msgs
        epochs = [m for m in msgs if m[0] == "epoch"]
        assert [m[1] for m in epochs] == [0, 1]
        for _, _, length, batches, indices in epochs:
            assert length == batches == 1000 // b
            assert len(set(indices)) == len(indices) == batches * b
        assert msgs[-1][0] == "end"
    assert recovery < 20, recovery


# ---- one process ------------------------------------------------------------


@pytest.fixture
def server():
    """An in-process server: 1000 synthetic samples of [3,16,16], batch 64, window 4."""
    with batchcast.Server(synthetic=1000, size=SIZE, batch_size=64, window=4,
                          name=H.unique_name("srv")) as s:
        yield s


def test_len_equals_batches_and_epochs_end():
    with batchcast.Server(synthetic=1000, size=SIZE, batch_size=64, window=4, epochs=2,
                          name=H.unique_name("len")) as srv:
        loader = batchcast.Loader(srv.endpoint, batch_size=48, drop_last=False)
        assert loader.epoch_len == 1000 and loader.producer_batch_size == 64 and loader.window == 4
        assert loader.fields == [("image", "uint8", (3, SIZE, SIZE)), ("label", "int64", ())]
        assert len(loader) == 21
        for epoch in range(2):
            sizes = []
            seen = []
            for images, labels in loader:
                assert loader.epoch == epoch
                sizes.append(images.shape[0])
                seen += loader.indices.tolist()
                H.check_synthetic_batch(images, labels, loader.indices, SIZE)
            assert len(sizes) == len(loader)
            assert sizes == [48] * 20 + [40]
            assert sorted(seen) == list(range(1000))
            assert loader.epoch == epoch  # the epoch that just ended
        with pytest.raises(batchcast.EndOfStream, match="stream has ended"):
            for _ in loader:
                pass
        with pytest.raises(batchcast.EndOfStream):  # and stays ended
            next(iter(loader))


def test_break_resumes_the_same_epoch(server):
    loader = batchcast.Loader(server.endpoint, batch_size=100)
    seen = []
    for i, _ in enumerate(loader):
        seen += loader.indices.tolist()
        if i == 3:
            break
    for _ in loader:
        seen += loader.indices.tolist()
    assert sorted(seen) == list(range(1000)) and loader.epoch == 0


def test_tensors_view_the_shared_ring(server):
    loader = batchcast.Loader(server.endpoint, batch_size=64)
    offsets, _ = _core.ring_layout(loader.fields, loader.window, loader.producer_batch_size)
    shm = "/dev/shm/" + _core.host_ring_shm_name(server.name)
    ptrs = {"image": [], "label": []}
    for _, (images, labels) in zip(range(12), loader):
        assert loader.zero_copy
        H.check_synthetic_batch(images, labels, loader.indices, SIZE)
        for field, t in (("image", images), ("label", labels)):
            ptr = t.data_ptr()
            lo, hi, path = H.mapping_of(ptr)
            assert path == shm, f"{field} tensor at {ptr:#x} is not in the ring mapping: {path}"
            first, stride = offsets[field]
            slot, rem = divmod(ptr - lo - first, stride)
            assert rem == 0 and 0 <= slot < loader.window
            assert ptr + t.numel() * t.element_size() <= hi
            ptrs[field].append(ptr)
        del images, labels
    for field, values in ptrs.items():
        stride = offsets[field][1]
        assert all((b - a) % stride == 0 for a, b in zip(values, values[1:]))
        assert 2 <= len(set(values)) <= loader.window
        # batch k of the stream is in slot k mod window
        assert values[: loader.window] == values[loader.window: 2 * loader.window]


def test_batches_spanning_slots_are_private_copies(server):
    loader = batchcast.Loader(server.endpoint, batch_size=48)
    kinds = set()
    for _, (images, labels) in zip(range(8), loader):
        H.check_synthetic_batch(images, labels, loader.indices, SIZE)
        in_ring = H.mapping_of(images.data_ptr())[2].endswith(_core.host_ring_shm_name(server.name))
        assert in_ring == loader.zero_copy
        kinds.add(loader.zero_copy)
    assert kinds == {True, False}


def test_a_loader_naming_a_gpu_is_served_from_a_host_ring(server):
    # A server's only ring serves every consumer, whatever GPU it names
    # (Note [Rings per GPU]); the tensors say where they are.
    loader = batchcast.Loader(server.endpoint, batch_size=48, device="cuda:3")
    assert loader.ring_device == "cpu"
    for _, (images, labels) in zip(range(4), loader):
        assert images.device.type == "cpu"
        H.check_synthetic_batch(images, labels, loader.indices, SIZE)
    loader.close()
    for bad in ("gpu1", "cuda:", "cuda:x", True, 1.5):
        with pytest.raises(batchcast.InvalidArgument, match="device"):
            batchcast.Loader(server.endpoint, batch_size=48, device=bad)


def test_cuda_all_without_a_gpu_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible")
    with pytest.raises(batchcast.InvalidArgument, match="cuda:all: no GPU is visible"):
        batchcast.Server(synthetic=100, size=8, device="cuda:all", name=H.unique_name("all"))
    with pytest.raises(batchcast.InvalidArgument, match="names cuda:1 twice"):
        batchcast.Server(synthetic=100, size=8, device="cuda:1,1", name=H.unique_name("twice"))


def test_kept_tensor_keeps_its_values_while_the_producer_runs_on(server):
    a = batchcast.Loader(server.endpoint, batch_size=64)
    b = batchcast.Loader(server.endpoint, batch_size=32)
    stop = threading.Event()
    b_batches = []

    def run_b():
        for images, labels in H.endless(b):
            H.check_synthetic_batch(images, labels, b.indices, SIZE)
            b_batches.append(1)
            if stop.is_set():
                return

    thread = threading.Thread(target=run_b)
    thread.start()
    try:
        stream = H.endless(a)
        held_images, held_labels = next(stream)
        assert a.zero_copy
        held_idx = a.indices.clone()
        reference = held_images.clone()
        published = server.stats()["samples_published"]
        for _ in range(50):
            images, labels = next(stream)
            H.check_synthetic_batch(images, labels, a.indices, SIZE)
        del images, labels
        # the ring (4 slots of 64) went round many times meanwhile
        assert server.stats()["samples_published"] - published >= 10 * 4 * 64
        assert torch.equal(held_images, reference)
        H.check_synthetic_batch(held_images, held_labels, held_idx, SIZE)
    finally:
        stop.set()
        a.close()  # b is no longer paced by a
        thread.join(10)
    assert not thread.is_alive() and len(b_batches) > 50


def test_lease_ends_when_the_last_tensor_is_freed(server):
    loader = batchcast.Loader(server.endpoint, batch_size=64, prefetch=2)

    def my_leases():
        (me,) = [c for c in loader.stats()["consumers"] if c["id"] == loader.consumer_id]
        return me["leases"]

    stream = H.endless(loader)
    held = [next(stream) for _ in range(3)]
    view = held[0][0][1:5]  # a view keeps the batch too
    assert my_leases() >= 3
    del held
    gc.collect()
    assert my_leases() >= 1  # `view` still pins the first batch
    assert view.sum() >= 0
    del view
    gc.collect()
    assert my_leases() <= 2  # only the prefetched requests
    next(stream)  # and the stream goes on


def _thread_names():
    names = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:  # the thread ended meanwhile
            pass
    return names


def test_in_process_server_threads_are_named():
    # top -H / ps -L show which threads of a trainer's process are the
    # server's (core/src/thread_name.h); benchmarks/bench_proc.py counts
    # their CPU by these names.
    with batchcast.Server(synthetic=300, size=8, batch_size=32, window=4, workers=2,
                          name=H.unique_name("names")) as srv:
        loader = batchcast.Loader(srv.endpoint, batch_size=32)
        next(iter(loader))
        names = _thread_names()
        loader.close()
    assert {"bc-control", "bc-producer", "bc-flush"} <= set(names), names


def test_in_process_server_context_manager():
    name = H.unique_name("ctx")
    with batchcast.Server(synthetic=300, size=8, batch_size=32, window=4, name=name) as srv:
        assert srv.endpoint.startswith("ipc://") and srv.name == name
        assert srv.epoch_len == 300
        socket_path = srv.endpoint[len("ipc://"):]
        assert os.path.exists(socket_path)
        loader = batchcast.Loader(name, batch_size=30)
        first = None
        count = 0
        for images, labels in loader:
            count += 1
            if first is None:
                first = images  # keeps one lease (one slot) only
        assert count == len(loader) == 10
        st = srv.stats()
        assert st["name"] == name and len(st["consumers"]) == 1
        assert batchcast.query_stats(name)["name"] == name
        assert "batchcast.Server" in repr(srv)
    assert srv.closed and not os.path.exists(socket_path)
    assert int(first.sum()) >= 0  # the memory is still mapped after the server stopped
    with pytest.raises(batchcast.ServerUnavailable, match="stopped"):
        for _ in range(100):
            for _ in loader:
                pass
    with pytest.raises(batchcast.Cancelled):
        srv.stats()


def test_server_wait_returns_when_the_stream_ended():
    with batchcast.Server(synthetic=100, size=4, batch_size=10, window=2, epochs=1,
                          name=H.unique_name("wait")) as srv:
        with batchcast.Loader(srv.endpoint, batch_size=10) as loader:
            assert srv.wait(timeout=0.2) is False
            assert sum(1 for _ in loader) == 10
        assert srv.wait(timeout=10) is True


def test_errors_are_typed_and_carry_the_message():
    missing = H.unique_name("missing")
    with pytest.raises(batchcast.NotFound, match=missing) as e:
        batchcast.Loader(missing, batch_size=8)
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, batchcast.BatchcastError)
    assert e.value.code == "NotFound"
    with pytest.raises(TypeError, match="bogus"):
        batchcast.Server(synthetic=10, bogus=1)
    with pytest.raises(batchcast.InvalidArgument, match="window") as e:
        batchcast.Server(synthetic=10, window=1, name=H.unique_name("bad"))
    assert isinstance(e.value, ValueError)
    with pytest.raises(ValueError, match="join"):
        batchcast.Loader("x", batch_size=8, join="sometime")
    with pytest.raises(ValueError, match="batch_size"):
        batchcast.Loader("x", batch_size=0)
    expected = {
        1: (batchcast.InvalidArgument, ValueError), 2: (batchcast.NotFound, FileNotFoundError),
        3: (batchcast.ServerUnavailable, ConnectionError), 4: (batchcast.Timeout, TimeoutError),
        5: (batchcast.ResourceExhausted, batchcast.Evicted), 6: (batchcast.Cancelled,),
        7: (batchcast.InternalError,), 8: (batchcast.EndOfStream,), 9: (batchcast.DataLoss,),
        10: (batchcast.PermissionDenied, PermissionError),
    }
    for code, classes in expected.items():
        with pytest.raises(classes[0]) as e:
            _core._raise_status(code, f"message {code}")
        assert str(e.value) == f"message {code}"
        assert all(isinstance(e.value, c) for c in classes + (RuntimeError,))
        assert type(e.value).__module__ == "batchcast"


def test_server_refusals_and_timeouts(server):
    with pytest.raises(batchcast.InvalidArgument, match="batch size 1000 is out of range"):
        batchcast.Loader(server.endpoint, batch_size=1000)
    with batchcast.Server(synthetic=100, size=4, min_consumers=2,
                          name=H.unique_name("tmo")) as waiting:
        loader = batchcast.Loader(waiting.endpoint, batch_size=10, timeout=0.3)
        t0 = time.monotonic()
        with pytest.raises(batchcast.Timeout, match="no batch"):
            next(iter(loader))
        assert time.monotonic() - t0 < 3


def test_as_dict_and_indices(server):
    loader = batchcast.Loader(server.endpoint, batch_size=16, as_dict=True)
    assert loader.indices is None
    batch = next(iter(loader))
    assert set(batch) == {"image", "label"} and batch["image"].dtype == torch.uint8
    assert loader.indices.dtype == torch.int64 and loader.indices.shape == (16,)
    assert torch.equal(batch["label"], loader.indices % 1000)
    loader.close()
    assert loader.closed
    with pytest.raises(batchcast.Cancelled):
        next(iter(loader))


def test_dlpack_capsule_protocol(server):
    consumer = _core.Consumer(server.endpoint, 64)
    # Capsules dropped unconsumed call the deleter themselves: far more batches
    # than max_leases (16) go through without running out of leases.
    for _ in range(60):
        item = consumer.next()
        if item is not None:
            assert all('"dltensor"' in repr(c) for c in item[0])
    item = None
    while item is None:
        item = consumer.next()
    capsules = item[0]
    images = torch.utils.dlpack.from_dlpack(capsules[0])
    assert '"used_dltensor"' in repr(capsules[0])  # torch owns it now
    assert '"dltensor"' in repr(capsules[1])
    del capsules, item
    gc.collect()
    assert images.shape == (64, 3, SIZE, SIZE)
    consumer.close()
    assert int(images.sum()) >= 0  # still valid: the lease outlives the consumer
