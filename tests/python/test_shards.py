"""Tar shards (WebDataset layout) from Python.

tools/make_dataset.py packs a folder into shards (--shards N / make_shards). An
in-process batchcast.Server serves the brace pattern (and the same shards given as
a list of paths, and their directory); a Loader reads every sample exactly once
per epoch, each with the label and the pixels the server of the folder gives the
same index with the same seed. Hostile shards (a member that is not a JPEG, a
sample without label, a truncated shard) are skipped and counted. The make_dataset
command line writes shards with each label format.

Run: BATCHCAST_BUILD_DIR=build-py /usr/bin/python3 -m pytest tests/python -q
"""
import importlib.util
import os
import subprocess
import sys
import tarfile

import numpy as np
import pytest

import _bc_helpers as H

batchcast = H.require_batchcast()

TOOL = os.path.join(H.REPO, "tools", "make_dataset.py")
SIZE, SEED = 16, 4


def _tool():
    spec = importlib.util.spec_from_file_location("make_dataset_for_shards", TOOL)
    md = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(md)
    return md


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    md = _tool()
    root = tmp_path_factory.mktemp("shards")
    folder = root / "folder"
    md.make_dataset(folder, classes=3, per_class=7, seed=3, workers=1)
    shards = md.make_shards(folder, root / "shards", per_shard=5, label_format="json")
    hostile = md.make_shards(folder, root / "hostile", per_shard=5, hostile=True)
    return str(folder), shards, hostile


def serve(data, **options):
    try:
        return batchcast.Server(data, name=H.unique_name("shards"), size=SIZE, seed=SEED,
                                batch_size=4, window=4, workers=2, **options)
    except batchcast.BatchcastError as e:  # noqa: F841
        if "no tar shard support" in str(e):
            pytest.skip("this build has no tar shard support (built without libarchive)")
        raise


def read_epochs(server, epochs):
    loader = batchcast.Loader(server.endpoint, batch_size=5, drop_last=False, join="next_epoch")
    out = []
    for _ in range(epochs):
        epoch = {}
        for images, labels in loader:
            for i, index in enumerate(loader.indices.tolist()):
                assert index not in epoch, f"index {index} came twice in an epoch"
                epoch[index] = (int(labels[i]), images[i].clone().numpy())
        out.append(epoch)
    loader.close()
    return out


def test_shards_serve_the_folder_samples_once_per_epoch(data):
    folder, shards, _ = data
    with serve(shards["pattern"], epochs=2, shuffle_buffer=6) as srv:
        got = read_epochs(srv, 2)
        stats = srv.stats()
    with serve(folder, epochs=2) as srv:
        want = read_epochs(srv, 2)
    for e in range(2):
        assert sorted(got[e]) == list(range(21))
        for index, (label, image) in got[e].items():
            assert label == want[e][index][0], index
            np.testing.assert_array_equal(image, want[e][index][1])
    assert [list(g) for g in got] != [list(w) for w in want], "shard order, not the folder's"
    counters = stats["source_counters"]
    assert counters["shards"] == 5 and counters["shard_rereads"] == 0, counters


def test_a_list_of_shards_and_a_directory(data):
    _, shards, _ = data
    for spec in (shards["shards"], os.path.dirname(shards["shards"][0])):
        with serve(spec, epochs=1) as srv:
            assert srv.epoch_len == 21
            (epoch,) = read_epochs(srv, 1)
            assert sorted(epoch) == list(range(21))
    with pytest.raises(batchcast.InvalidArgument):
        batchcast.Server([], name=H.unique_name("empty"))


def test_hostile_shards_are_skipped_and_counted(data):
    _, _, hostile = data
    with serve(hostile["pattern"], epochs=1) as srv:
        (epoch,) = read_epochs(srv, 1)
        stats = srv.stats()
    assert sorted(epoch) == list(range(21 + hostile["hostile"]["served"]))
    counters = stats["source_counters"]
    assert counters["files_dropped_at_scan"] == hostile["hostile"]["dropped_at_scan"]
    assert counters["shards_damaged"] == hostile["hostile"]["damaged_shards"]
    with pytest.raises(batchcast.BatchcastError, match="--on-error fail"):
        serve(hostile["pattern"], on_error="fail")


@pytest.mark.parametrize("label_format", ["cls", "json", "txt"])
def test_make_dataset_writes_shards(tmp_path, label_format):
    out = tmp_path / "s"
    r = subprocess.run([sys.executable, TOOL, str(out), "--classes", "2", "--per-class", "3",
                        "--shards", "4", "--label-format", label_format, "--workers", "1"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "6 samples in 2 shards" in r.stdout
    with tarfile.open(out / "train-000001.tar") as t:
        names = t.getnames()
        assert names == ["000004.jpg", "000004." + label_format, "000005.jpg",
                         "000005." + label_format]
        label = t.extractfile(names[1]).read().decode()
    assert ("1" in label) and (label_format != "json" or '"label"' in label)
    bad = subprocess.run([sys.executable, TOOL, str(tmp_path / "x"), "--hostile-shards"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--shards" in bad.stderr
