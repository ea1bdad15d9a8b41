"""Exactly once with files that fail only when decoded, through batchcast.Loader.

A dataset from tools/make_dataset.py --decode-failures (truncated files and files
with corrupt entropy-coded data: both pass the server's header scan) is served by
an in-process batchcast.Server on the CPU; two Loaders of different batch sizes
(one without drop_last) read two epochs each. Every consumer epoch must hold each
good index exactly once and the bad ones never (no stand-in), each sample with its
own label and the pixels batchcast_imgtool makes of its own file; len(loader) stays
the announced value and an epoch has at most one batch fewer per dropped file; the
stats count the dropped files once and every dropped sample.

Run: BATCHCAST_BUILD_DIR=build-py /usr/bin/python3 -m pytest tests/python -q
"""
import importlib.util
import os
import subprocess
import threading

import numpy as np
import pytest

import _bc_helpers as H

batchcast = H.require_batchcast()

TOOL = os.path.join(H.REPO, "tools", "make_dataset.py")
IMGTOOL = os.path.join(H.BUILD, "tools", "batchcast_imgtool") if H.BUILD else None
SIZE, SEED = 16, 9
BAD = 3


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    spec = importlib.util.spec_from_file_location("make_dataset_for_drops", TOOL)
    md = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(md)
    out = tmp_path_factory.mktemp("drops") / "data"
    summary = md.make_dataset(out, classes=2, per_class=8, seed=2, decode_failures=BAD, workers=1)
    files = H.folder_listing(str(out))
    bad = {i for i, (p, _) in enumerate(files) if p in set(summary["decode_failures"])}
    assert len(files) == 16 + BAD and len(bad) == BAD
    return files, bad


def read_epochs(loader, epochs, out):
    for _ in range(epochs):
        epoch = []
        for images, labels in loader:
            for i, index in enumerate(loader.indices.tolist()):
                epoch.append((index, int(labels[i]), images[i].clone().numpy()))
        out.append(epoch)


def reference(path, epoch, index, tmp_path):
    raw = tmp_path / f"ref_{epoch}_{index}.raw"
    subprocess.run([IMGTOOL, path, str(raw), "--size", str(SIZE), "--seed", str(SEED),
                    "--epoch", str(epoch), "--index", str(index)],
                   check=True, capture_output=True, timeout=60)
    return np.fromfile(raw, np.float32).reshape(3, SIZE, SIZE)


def test_files_that_fail_to_decode_are_dropped_never_replaced(dataset, tmp_path):
    if not (IMGTOOL and os.access(IMGTOOL, os.X_OK)):
        pytest.skip(f"batchcast_imgtool not built: {IMGTOOL}")
    files, bad = dataset
    n = len(files)
    name = H.unique_name("drops")
    data_dir = os.path.dirname(os.path.dirname(files[0][0]))
    with batchcast.Server(data_dir, name=name, size=SIZE, seed=SEED, batch_size=4, window=4,
                          epochs=2, min_consumers=2, workers=2) as srv:
        keep_all = batchcast.Loader(name, batch_size=5, drop_last=False, join="next_epoch")
        drop = batchcast.Loader(name, batch_size=3, drop_last=True, join="next_epoch")
        assert len(keep_all) == -(-n // 5) and len(drop) == n // 3  # announced, unchanged
        reads = {5: [], 3: []}
        threads = [threading.Thread(target=read_epochs, args=(ld, 2, reads[ld.batch_size]))
                   for ld in (keep_all, drop)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        stats = srv.stats()
        keep_all.close()
        drop.close()
    good = [i for i in range(n) if i not in bad]
    for batch, epochs in reads.items():
        assert len(epochs) == 2, batch
        for e, epoch in enumerate(epochs):
            indices = [index for index, _, _ in epoch]
            assert len(indices) == len(set(indices)), f"batch {batch}: an index came twice"
            assert not set(indices) & bad, f"batch {batch}: a dropped file's sample arrived"
            if batch == 5:
                assert sorted(indices) == good, "every good index exactly once"
            else:
                assert set(indices) <= set(good) and len(good) - len(indices) < batch
                assert len(indices) % batch == 0
            batches = -(-len(indices) // batch)
            announced = -(-n // batch) if batch == 5 else n // batch
            assert announced - BAD <= batches <= announced
            for index, label, image in epoch:
                path, want_label = files[index]
                assert label == want_label, (index, label)
                if batch == 5:  # the pixels of its own file, in producer epoch e
                    np.testing.assert_array_equal(image, reference(path, e, index, tmp_path))
    counters = stats["source_counters"]
    assert counters["files_dropped_at_decode"] == BAD, counters
    assert counters["samples_dropped"] == 2 * BAD, counters
    assert stats["holes"] == 2 * BAD and stats["epoch_len"] == n
