"""Image formats other than JPEG (Note [Image formats]) against PIL / torchvision.

* Each variant tools/make_dataset.py --formats mixed writes (PNG 8/16-bit,
  palette, gray, gray 16-bit, RGBA, gray + alpha, lossy WebP, lossless WebP with
  alpha, BMP, TIFF (LZW, gray), PPM, a PNG named .JPEG), through batchcast_imgtool
  with the eval transform, against torchvision's Resize + CenterCrop + ToTensor +
  Normalize on Image.open(path).convert("RGB"): the same bounds as for JPEG
  (test_image_reference.py's EVAL_TOL). 16-bit gray is the one place where PIL's
  convert("RGB") clips instead of scaling (mode I;16 to L clamps at 255); batchcast
  keeps the high byte, so its reference is the high byte.
* A mixed folder served by batchcast.Server to a Loader: every index exactly once
  per epoch over two epochs, none dropped, each sample with its own label and the
  pixels batchcast_imgtool makes of its own file; the stats count the files of
  each format.

Run: BATCHCAST_BUILD_DIR=build /usr/bin/python3 -m pytest tests/python/test_formats.py -q
"""
import collections
import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

import _bc_helpers as H
from test_image_reference import EVAL_TOL, TOOL, check, eval_reference, photo_like, run_tool

batchcast = H.require_batchcast()

sys.path.insert(0, os.path.join(H.REPO, "tools"))
from dataset_maker import formats as F  # noqa: E402
from dataset_maker.folder import make_dataset  # noqa: E402

SIZE, SEED = 32, 4


def pil_rgb(path):
    """What a torch DataLoader with PIL reads: convert("RGB"), 16-bit gray by its high byte."""
    img = Image.open(path)
    if img.mode in ("I;16", "I;16B", "I"):
        return Image.fromarray((np.asarray(img, np.uint32) >> 8).astype(np.uint8), "L")
    return img


@pytest.mark.skipif(TOOL is None, reason="batchcast_imgtool not built")
@pytest.mark.parametrize("variant", F.VARIANTS[1:])
@pytest.mark.parametrize("w,h", [(500, 375), (375, 500), (1024, 768)])
def test_eval_matches_torchvision_on_pil(tmp_path, variant, w, h):
    data, ext = F.encode(variant, photo_like(w, h, 3 + w))
    path = tmp_path / f"image{ext}"
    path.write_bytes(data)
    got, _ = run_tool(path, tmp_path, "--transform", "eval")
    ref = eval_reference(pil_rgb(path), 224)
    check(np.abs(got - ref), EVAL_TOL, f"eval float32 {variant} {w}x{h}")


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    out = tmp_path_factory.mktemp("formats") / "data"
    summary = make_dataset(out, classes=2, per_class=11, seed=1, formats="mixed", workers=1)
    return str(out), H.folder_listing(str(out)), summary


def test_mixed_folder_every_sample_once_per_epoch(mixed, tmp_path):
    if TOOL is None:
        pytest.skip("batchcast_imgtool not built")
    data_dir, files, summary = mixed
    assert len(files) == 22 and any(p.endswith(".JPEG") and open(p, "rb").read(4) == b"\x89PNG"
                                    for p, _ in files)
    name = H.unique_name("formats")
    with batchcast.Server(data_dir, name=name, size=SIZE, seed=SEED, batch_size=4, window=4,
                          epochs=2, workers=2) as srv:
        loader = batchcast.Loader(name, batch_size=5, drop_last=False, join="next_epoch")
        assert len(loader) == 5
        for epoch in range(2):
            seen = collections.Counter()
            for images, labels in loader:
                for i, index in enumerate(loader.indices.tolist()):
                    seen[index] += 1
                    path, label = files[index]
                    assert int(labels[i]) == label
                    if epoch == 0:
                        raw = tmp_path / "ref.raw"
                        subprocess.run([str(TOOL), path, str(raw), "--size", str(SIZE), "--seed",
                                        str(SEED), "--epoch", "0", "--index", str(index)],
                                       check=True, capture_output=True, timeout=60)
                        want = np.fromfile(raw, np.float32).reshape(3, SIZE, SIZE)
                        np.testing.assert_array_equal(images[i].numpy(), want, err_msg=path)
            assert seen == collections.Counter(range(22)), (epoch, seen)
        counters = srv.stats()["source_counters"]
    assert counters["files_dropped_at_scan"] == 0 and counters["samples_dropped"] == 0
    want = collections.Counter()
    for variant, n in summary["formats"].items():
        fmt = "pnm" if variant == "ppm" else "png" if variant.startswith("png") else variant
        want[fmt.split("-")[0]] += n
    for fmt in ("jpeg", "png", "webp", "bmp", "tiff", "pnm"):
        assert counters["files_" + fmt] == want[fmt], (fmt, counters)
