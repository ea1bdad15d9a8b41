"""batchcast.Producer: any Python iterable (a torch DataLoader, a list of dicts,
a generator) served to batchcast Loaders.

Run: BATCHCAST_BUILD_DIR=build-py /usr/bin/python3 -m pytest tests/python -q
"""
import multiprocessing
import threading

import numpy as np
import pytest

import _bc_helpers as H

batchcast = H.require_batchcast()
import torch  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

N = 200


def toy_dataset():
    """Sample i: x = a float32 [3,4,4] tensor unique to i, y = i."""
    x = torch.arange(N * 48, dtype=torch.float32).view(N, 3, 4, 4) / 7.0
    return TensorDataset(x, torch.arange(N))


def read_epochs(loader, epochs, out):
    """Clones of every batch of `epochs` epochs, into out (a list)."""
    for _ in range(epochs):
        batches = []
        for x, y in loader:
            batches.append((x.clone(), y.clone(), loader.indices.clone()))
        out.append(batches)


def test_dataloader_reaches_two_loaders_with_identical_batches():
    ds = toy_dataset()
    dl = DataLoader(ds, batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(3))
    name = H.unique_name("prod")
    with batchcast.Producer(dl, name=name, window=4, epochs=2, min_consumers=2) as producer:
        assert producer.epoch_len == N and producer.batch_size == 16
        assert producer.fields == [("image", "float32", (3, 4, 4)), ("label", "int64", ())]
        loaders = [batchcast.Loader(name, batch_size=16, drop_last=False) for _ in range(2)]
        assert [len(ld) for ld in loaders] == [13, 13]
        results = [[], []]
        threads = [threading.Thread(target=read_epochs, args=(ld, 2, out))
                   for ld, out in zip(loaders, results)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert producer.wait(timeout=0.3) is False  # loaders still attached
        for ld in loaders:
            with pytest.raises(batchcast.EndOfStream):
                next(iter(ld))
            ld.close()
        assert producer.wait(timeout=10) is True
        assert producer.epochs_done == 2 and producer.samples_written == 2 * N
    a, b = results
    assert len(a) == len(b) == 2
    orders = []
    for epoch in range(2):
        assert len(a[epoch]) == len(b[epoch]) == 13
        labels = []
        for (xa, ya, ia), (xb, yb, ib) in zip(a[epoch], b[epoch]):
            assert torch.equal(xa, xb) and torch.equal(ya, yb) and torch.equal(ia, ib)
            assert torch.equal(xa, ds.tensors[0][ya])  # the samples themselves, intact
            labels += ya.tolist()
        assert sorted(labels) == list(range(N))  # one pass of the DataLoader
        # no `index` field: indices count samples within the epoch
        assert torch.cat([i for _, _, i in a[epoch]]).tolist() == list(range(N))
        orders.append(labels)
    assert orders[0] != orders[1]  # the DataLoader reshuffled: epoch = one pass


def _loader_child(name, queue):
    import batchcast

    try:
        loader = batchcast.Loader(name, batch_size=20, join="next_epoch")
        out = []
        for x, y in loader:
            out.append((y.tolist(), float(x.double().sum())))
        queue.put(("ok", out))
    except BaseException as e:  # noqa: BLE001
        queue.put(("error", repr(e)))


def test_producer_serves_another_process():
    ds = toy_dataset()
    name = H.unique_name("prodproc")
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    with batchcast.Producer(DataLoader(ds, batch_size=32), name=name, window=4, epochs=1) as prod:
        child = ctx.Process(target=_loader_child, args=(name, queue))
        child.start()
        kind, out = queue.get(timeout=40)
        child.join(10)
        assert kind == "ok", out
        assert prod.wait(timeout=10)
    assert len(out) == N // 20
    for labels, total in out:
        assert labels == list(range(labels[0], labels[0] + 20))
        assert total == pytest.approx(float(ds.tensors[0][labels].double().sum()))


def test_dict_batches_with_index_field_and_split_slots():
    # Batches of 24 through slots of 8; dict keys become the fields; `index` is metadata.
    batches = []
    for start in range(0, 96, 24):
        ids = torch.arange(start, start + 24)
        batches.append({
            "pixels": (ids.view(-1, 1) * 10 + torch.arange(5)).to(torch.bfloat16),
            "mask": (ids % 3 == 0),
            "target": ids.to(torch.int32) * -1,
            "index": ids + 1000,
        })
    name = H.unique_name("dict")
    with batchcast.Producer(batches, name=name, window=6, batch_size=8, epochs=1) as producer:
        assert producer.epoch_len == 96
        assert [f[0] for f in producer.fields] == ["pixels", "mask", "target"]
        loader = batchcast.Loader(name, batch_size=12)
        seen = []
        for batch in loader:
            assert set(batch) == {"pixels", "mask", "target"}
            ids = loader.indices - 1000
            assert batch["pixels"].dtype == torch.bfloat16 and batch["pixels"].shape == (12, 5)
            expected = (ids.view(-1, 1) * 10 + torch.arange(5)).to(torch.bfloat16)
            assert torch.equal(batch["pixels"], expected)
            assert batch["mask"].dtype == torch.bool and torch.equal(batch["mask"], ids % 3 == 0)
            assert torch.equal(batch["target"], ids.to(torch.int32) * -1)
            seen += ids.tolist()
        assert seen == list(range(96))
        loader.close()
        assert producer.wait(timeout=10)
        assert producer.stats()["batch_size"] == 8


def test_a_bool_field_has_one_dlpack_type_for_the_producer_and_the_loader():
    # One DLPack conversion (core/src/dlpack.h): the slot a producer writes
    # through WriteSlot.field_dlpack and the batch a consumer reads carry a bool
    # field with the same DLPack type (bool where the build's DLPack has it,
    # else uint8), and a Loader hands it out as torch.bool.
    from batchcast import _core
    from torch.utils.dlpack import from_dlpack

    mask = torch.arange(24).view(8, 3) % 3 == 0
    name = H.unique_name("bool")
    server = _core.Server.start_external(
        {"name": name, "window": 4, "batch_size": 8, "epochs": 0},
        [("mask", "bool", (3,)), ("label", "int64", ())], 8)
    try:
        consumer = _core.Consumer(server.endpoint, 8)
        loader = batchcast.Loader(name, batch_size=8, timeout=10)
        for epoch in range(2):
            slot = server.begin_batch(epoch, np.arange(8), 10.0)
            written = from_dlpack(slot.field_dlpack(0))
            assert written.dtype in (torch.bool, torch.uint8) and written.shape == (8, 3)
            written.copy_(mask)
            from_dlpack(slot.field_dlpack(1)).copy_(torch.arange(8))
            slot_dtype = written.dtype
            del written
            server.commit_batch(slot)
        capsules, indices, *_ = consumer.next()
        read = from_dlpack(capsules[0])
        assert read.dtype == slot_dtype
        assert torch.equal(read.bool(), mask)
        del read, capsules
        batch = next(iter(loader))
        if isinstance(batch, dict):
            got = batch["mask"]
        else:
            got = batch[0]
        assert got.dtype == torch.bool and torch.equal(got, mask)
        del batch, got
        loader.close()
        consumer.close()
    finally:
        server.close()


def test_generator_single_epoch_and_tuple_fields():
    def gen():
        for i in range(5):
            yield (np.full((10, 2), i, dtype=np.float64), torch.arange(i * 10, i * 10 + 10),
                   torch.ones(10, 3, dtype=torch.uint8))

    with pytest.raises(ValueError, match="one-shot"):
        batchcast.Producer(gen(), name=H.unique_name("gen"), epoch_len=50)
    with pytest.raises(ValueError, match="epoch_len"):
        batchcast.Producer(gen(), name=H.unique_name("gen"), epochs=1)
    name = H.unique_name("gen")
    with batchcast.Producer(gen(), name=name, epochs=1, epoch_len=50, window=4) as producer:
        assert [f[0] for f in producer.fields] == ["image", "label", "field2"]
        loader = batchcast.Loader(name, batch_size=10)
        rows = []
        for image, label, extra in loader:  # a tuple of three
            assert image.dtype == torch.float64 and extra.shape == (10, 3)
            rows.append(int(image[0, 0]))
            assert torch.equal(label, loader.indices)
        assert rows == [0, 1, 2, 3, 4]


def test_a_pass_of_the_wrong_length_stops_the_server_with_a_clear_error():
    ds = toy_dataset()
    name = H.unique_name("short")
    producer = batchcast.Producer(DataLoader(ds, batch_size=20), name=name, epochs=2,
                                  epoch_len=N + 20, window=4)
    loader = batchcast.Loader(name, batch_size=20, timeout=10)
    with pytest.raises(batchcast.ServerUnavailable, match="stopped"):
        for _ in range(3):
            for _ in loader:
                pass
    with pytest.raises(ValueError, match=f"yielded {N} samples, but epoch_len is {N + 20}"):
        producer.wait(timeout=10)
    producer.close()
    assert producer.closed


def test_close_while_waiting_for_consumers_and_bad_options():
    ds = toy_dataset()
    with pytest.raises(TypeError, match="size"):
        batchcast.Producer(DataLoader(ds, batch_size=20), name=H.unique_name("opt"), size=3)
    with pytest.raises(ValueError, match="cannot infer"):
        batchcast.Producer(iter_only(), name=H.unique_name("inf"))
    producer = batchcast.Producer(DataLoader(ds, batch_size=20), name=H.unique_name("idle"),
                                  min_consumers=3)
    assert producer.wait(timeout=0.2) is False  # waiting for its consumers
    producer.close()  # unblocks the producer thread at once
    assert producer.closed and producer.error is None


class iter_only:
    """Re-iterable, no length."""

    def __iter__(self):
        for _ in range(3):
            yield torch.zeros(4, 2)
