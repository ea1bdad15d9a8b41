"""The CPU image pipeline (batchcast_imgtool) against PIL / torchvision references.

The binary is found under $BATCHCAST_BUILD_DIR (default: build, relative to the
repository root) as tools/batchcast_imgtool; the tests skip when it is missing.

What is compared (JPEGs made here with PIL: RGB 4:2:0 and 4:4:4, grayscale,
CMYK with an Adobe marker, progressive; "photo-like" content: smooth shading,
soft-edged shapes, mild noise):

* eval, float32 NCHW  vs torchvision Resize(round(size / 0.875)) + CenterCrop +
  ToTensor + Normalize on the PIL image (convert("RGB")): mean, 99th percentile
  and max of |diff| below EVAL_TOL (normalized units; 1 unit is about 57 levels
  of 255).
* eval, uint8 vs the same without ToTensor/Normalize: UINT8_TOL (levels).
* train, float32 vs PIL crop(CropParams) + resize(BILINEAR) + flip of the crop
  the tool prints (--print-crop): TRAIN_TOL.
* The crops follow the algorithm documented in transform.h (re-implemented here).
* dtype/layout: NHWC is the transpose of NCHW; float16/bfloat16 are float32
  rounded to nearest even; uint8 is unnormalized.
* bad files exit non-zero with the reason.

Why not exact: PIL's BILINEAR widens its filter when downscaling (antialias);
batchcast uses libjpeg DCT scaling plus OpenCV INTER_LINEAR (INTER_AREA for
> 2x reductions), and the eval box is rounded to whole source pixels.
"""

import io
import math
import os
import pathlib
import re
import subprocess

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFilter

torch = pytest.importorskip("torch")
T = pytest.importorskip("torchvision.transforms")

REPO = pathlib.Path(__file__).resolve().parents[2]
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)

# Tolerances on |ours - reference|: mean, 99th percentile and max, in
# normalized units for float outputs (1 unit is about 57 of 255 levels) and in
# levels for uint8 outputs. The max is reached at sharp edges, where rounding the
# eval box to whole source pixels (up to 0.5 px per edge) and the missing
# antialias (OpenCV bilinear vs PIL's widened filter) shift values the most.
EVAL_TOL = (0.02, 0.25, 1.0)
UINT8_TOL = (1.2, 14, 57)
TRAIN_TOL = (0.015, 0.2, 0.8)


def check(diff, tol, what):
    stats = (float(diff.mean()), float(np.percentile(diff, 99)), float(diff.max()))
    print(f"{what}: mean {stats[0]:.4f} p99 {stats[1]:.3f} max {stats[2]:.3f}")
    assert stats[0] < tol[0], f"{what}: mean {stats[0]} >= {tol[0]}"
    assert stats[1] < tol[1], f"{what}: p99 {stats[1]} >= {tol[1]}"
    assert stats[2] < tol[2], f"{what}: max {stats[2]} >= {tol[2]}"
    return stats


def _tool():
    build = pathlib.Path(os.environ.get("BATCHCAST_BUILD_DIR", "build"))
    if not build.is_absolute():
        build = REPO / build
    for candidate in (build / "tools" / "batchcast_imgtool", build / "batchcast_imgtool",
                      build / "core" / "batchcast_imgtool"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


TOOL = _tool()
pytestmark = pytest.mark.skipif(TOOL is None, reason="batchcast_imgtool not built "
                                "(set BATCHCAST_BUILD_DIR)")


# ---- images -----------------------------------------------------------------

def photo_like(w, h, seed):
    """Smooth shading, soft-edged shapes and mild noise, like a downscaled photo."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    base = np.zeros((h, w, 3), np.float32)
    for c in range(3):
        a, b, ph = rng.uniform(-1, 1, 3)
        wave = np.sin(x / w * 3 * a * np.pi + ph) * np.cos(y / h * 2 * b * np.pi)
        base[..., c] = 120 + 70 * wave + 40 * (x / w - 0.5)
    img = Image.fromarray(np.clip(base, 0, 255).astype(np.uint8))
    # Shapes drawn at 2x and downscaled: antialiased edges.
    big = img.resize((2 * w, 2 * h), Image.BILINEAR)
    draw = ImageDraw.Draw(big)
    for _ in range(14):
        cx, cy = rng.integers(0, 2 * w), rng.integers(0, 2 * h)
        r = int(rng.integers(8, max(9, w // 4)))
        color = tuple(int(v) for v in rng.integers(0, 256, 3))
        if rng.random() < 0.5:
            draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=color)
        else:
            draw.rectangle([cx - r, cy - r // 2, cx + r, cy + r // 2], fill=color)
    img = big.resize((w, h), Image.LANCZOS).filter(ImageFilter.GaussianBlur(0.6))
    arr = np.asarray(img).astype(np.float32) + rng.normal(0, 2.0, (h, w, 3))
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))


def save_jpeg(img, path, kind, quality=90):
    if kind == "rgb420":
        img.save(path, "JPEG", quality=quality, subsampling=2)
    elif kind == "rgb444":
        img.save(path, "JPEG", quality=quality, subsampling=0)
    elif kind == "progressive":
        img.save(path, "JPEG", quality=quality, progressive=True)
    elif kind == "gray":
        img.convert("L").save(path, "JPEG", quality=quality)
    elif kind == "cmyk":
        img.convert("CMYK").save(path, "JPEG", quality=quality)  # Adobe APP14, inverted
    else:
        raise ValueError(kind)
    return path


# ---- running the tool -------------------------------------------------------

def run_tool(path, tmp_path, *args, dtype="float32", layout="nchw", size=224):
    out = tmp_path / "out.raw"
    cmd = [str(TOOL), str(path), str(out), "--dtype", dtype, "--layout", layout,
           "--size", str(size), *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    np_dtype = {"float32": np.float32, "float16": np.float16, "uint8": np.uint8,
                "bfloat16": np.uint16}[dtype]
    data = np.fromfile(out, np_dtype)
    shape = (3, size, size) if layout == "nchw" else (size, size, 3)
    assert f"shape [{', '.join(map(str, shape))}] dtype {dtype} layout {layout}" in proc.stdout
    crop = None
    m = re.search(r"crop x=(\d+) y=(\d+) w=(\d+) h=(\d+) flip=([01])", proc.stdout)
    if m:
        crop = tuple(int(v) for v in m.groups())
    return data.reshape(shape), crop


def normalize(img):
    """ToTensor + Normalize of a PIL RGB image, as float32 CHW."""
    a = np.asarray(img.convert("RGB"), np.float32) / 255.0
    return ((a - MEAN) / STD).transpose(2, 0, 1)


def eval_reference(img, size):
    resize = int(round(size / 0.875))
    t = T.Compose([T.Resize(resize), T.CenterCrop(size), T.ToTensor(),
                   T.Normalize(MEAN.tolist(), STD.tolist())])
    return t(img.convert("RGB")).numpy()


def eval_reference_uint8(img, size):
    resize = int(round(size / 0.875))
    t = T.Compose([T.Resize(resize), T.CenterCrop(size)])
    return np.asarray(t(img.convert("RGB"))).transpose(2, 0, 1).astype(np.int16)


def train_reference(img, crop, size):
    x, y, w, h, flip = crop
    out = img.convert("RGB").crop((x, y, x + w, y + h)).resize((size, size), Image.BILINEAR)
    if flip:
        out = out.transpose(Image.FLIP_LEFT_RIGHT)
    return normalize(out)


CASES = [  # (width, height, kind)
    (500, 375, "rgb420"), (375, 500, "rgb444"), (640, 480, "progressive"),
    (500, 375, "gray"), (500, 375, "cmyk"), (1024, 768, "rgb420"), (200, 150, "rgb420"),
]


def make_case(tmp_path, w, h, kind, seed=0):
    path = tmp_path / f"{kind}_{w}x{h}.jpg"
    save_jpeg(photo_like(w, h, seed + 7 * w + h), path, kind)
    return path, Image.open(path)


# ---- accuracy ---------------------------------------------------------------

@pytest.mark.parametrize("w,h,kind", CASES)
def test_eval_float32_matches_torchvision(tmp_path, w, h, kind):
    path, img = make_case(tmp_path, w, h, kind)
    got, _ = run_tool(path, tmp_path, "--transform", "eval")
    ref = eval_reference(img, 224)
    check(np.abs(got - ref), EVAL_TOL, f"eval float32 {kind} {w}x{h}")


@pytest.mark.parametrize("w,h,kind", CASES)
def test_eval_uint8_matches_pil(tmp_path, w, h, kind):
    path, img = make_case(tmp_path, w, h, kind)
    got, _ = run_tool(path, tmp_path, "--transform", "eval", dtype="uint8")
    ref = eval_reference_uint8(img, 224)
    check(np.abs(got.astype(np.int16) - ref), UINT8_TOL, f"eval uint8 {kind} {w}x{h}")


@pytest.mark.parametrize("w,h,kind", [(500, 375, "rgb420"), (375, 500, "gray"),
                                      (500, 375, "cmyk"), (1024, 768, "rgb444")])
def test_train_matches_pil_crop_resize_flip(tmp_path, w, h, kind):
    path, img = make_case(tmp_path, w, h, kind)
    flips = 0
    for index in range(12):
        got, crop = run_tool(path, tmp_path, "--transform", "train", "--seed", 5, "--epoch", 2,
                             "--index", index, "--print-crop")
        assert crop is not None
        flips += crop[4]
        check(np.abs(got - train_reference(img, crop, 224)), TRAIN_TOL,
              f"train {kind} {w}x{h} crop {crop}")
    assert 0 < flips < 12


def test_other_size_and_normalization(tmp_path):
    path, img = make_case(tmp_path, 320, 240, "rgb420")
    mean, std = [0.5, 0.5, 0.5], [0.25, 0.5, 1.0]
    got, _ = run_tool(path, tmp_path, "--transform", "eval", "--mean", *mean, "--std", *std,
                      size=96)
    t = T.Compose([T.Resize(int(round(96 / 0.875))), T.CenterCrop(96), T.ToTensor(),
                   T.Normalize(mean, std)])
    ref = t(img.convert("RGB")).numpy()
    # In the units of the default std, to reuse the tolerances.
    diff = np.abs(got - ref) * np.array(std, np.float32)[:, None, None] / STD[:, None, None]
    check(diff, EVAL_TOL, "eval size 96, other mean/std")


# ---- crops follow the documented algorithm ------------------------------------

MASK64 = (1 << 64) - 1


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def mix_seed(a, b, c):
    state = a & MASK64
    state, h = splitmix64(state)
    state = h ^ b
    state, h = splitmix64(state)
    state = h ^ c
    return splitmix64(state)[1]


class Stream:
    def __init__(self, seed, epoch, index):
        self.state = mix_seed(seed, epoch, index & MASK64)

    def next(self):
        self.state, v = splitmix64(self.state)
        return v

    def unit(self):
        return (self.next() >> 11) * 2.0 ** -53

    def randint(self, n):
        limit = MASK64 - ((MASK64 % n) + 1) % n
        while True:
            v = self.next()
            if v <= limit:
                return v % n


def train_crop(seed, epoch, index, width, height, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    # The documented algorithm (transform.h); ratio bounds are float32 there.
    r0, r1 = float(np.float32(ratio[0])), float(np.float32(ratio[1]))
    s0, s1 = float(np.float32(scale[0])), float(np.float32(scale[1]))
    rng = Stream(seed, epoch, index)
    area = width * height
    for _ in range(10):
        target = area * (s0 + (s1 - s0) * rng.unit())
        aspect = math.exp(math.log(r0) + (math.log(r1) - math.log(r0)) * rng.unit())
        w = round(math.sqrt(target * aspect))
        h = round(math.sqrt(target / aspect))
        if 0 < w <= width and 0 < h <= height:
            y = rng.randint(height - h + 1)
            x = rng.randint(width - w + 1)
            break
    else:
        in_ratio = width / height
        if in_ratio < r0:
            w, h = width, round(width / r0)
        elif in_ratio > r1:
            h, w = height, round(height * r1)
        else:
            w, h = width, height
        y, x = (height - h) // 2, (width - w) // 2
    flip = rng.next() >> 63
    return (x, y, w, h, flip)


def eval_crop(width, height, size=224):
    resize = max(size, round(size / 0.875))
    if width <= height:
        new_w, new_h = resize, int(resize * height / width)
    else:
        new_h, new_w = resize, int(resize * width / height)
    top = round((new_h - size) / 2.0)
    left = round((new_w - size) / 2.0)
    sx, sy = width / new_w, height / new_h
    x0, x1 = round(left * sx), round((left + size) * sx)
    y0, y1 = round(top * sy), round((top + size) * sy)
    x0 = min(max(x0, 0), width - 1)
    y0 = min(max(y0, 0), height - 1)
    x1 = min(max(x1, x0 + 1), width)
    y1 = min(max(y1, y0 + 1), height)
    return (x0, y0, x1 - x0, y1 - y0, 0)


def test_golden_crops_match_the_cpp_tests():
    # The same values are pinned in tests/image/transform_test.cc.
    assert train_crop(0, 0, 0, 500, 375) == (312, 68, 170, 220, 0)
    assert train_crop(0, 7, 123456789, 640, 480) == (143, 42, 155, 206, 1)
    assert train_crop(0xDEADBEEF, 1, 5, 333, 500) == (75, 38, 244, 225, 1)


@pytest.mark.parametrize("w,h", [(500, 375), (333, 500), (1000, 40), (64, 64)])
def test_printed_crops_follow_documented_algorithm(tmp_path, w, h):
    path = save_jpeg(photo_like(w, h, 1), tmp_path / "c.jpg", "rgb420")
    for seed, epoch, index in [(0, 0, 0), (5, 1, 17), (2**40 + 3, 9, 123456789012), (7, 3, 2)]:
        _, crop = run_tool(path, tmp_path, "--transform", "train", "--seed", seed, "--epoch",
                           epoch, "--index", index, "--print-crop", dtype="uint8", size=32)
        assert crop == train_crop(seed, epoch, index, w, h), (seed, epoch, index)
    _, crop = run_tool(path, tmp_path, "--transform", "eval", "--print-crop", dtype="uint8")
    assert crop == eval_crop(w, h)


# ---- dtypes and layouts -------------------------------------------------------

def test_dtypes_and_layouts(tmp_path):
    path, _ = make_case(tmp_path, 500, 375, "rgb420")
    args = ("--transform", "train", "--seed", 3, "--index", 11)
    f32, _ = run_tool(path, tmp_path, *args)
    nhwc, _ = run_tool(path, tmp_path, *args, layout="nhwc")
    np.testing.assert_array_equal(nhwc.transpose(2, 0, 1), f32)
    f16, _ = run_tool(path, tmp_path, *args, dtype="float16")
    np.testing.assert_array_equal(f16, f32.astype(np.float16))
    bf16, _ = run_tool(path, tmp_path, *args, dtype="bfloat16")
    want = torch.from_numpy(f32).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(bf16, want)
    u8, _ = run_tool(path, tmp_path, *args, dtype="uint8")
    np.testing.assert_array_equal(normalize(Image.fromarray(u8.transpose(1, 2, 0))), f32)


# ---- bad input ----------------------------------------------------------------

def _fails(tmp_path, data, *expect):
    path = tmp_path / "bad.jpg"
    path.write_bytes(data)
    proc = subprocess.run([str(TOOL), str(path), str(tmp_path / "o.raw")], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for word in expect:
        assert word in proc.stderr, proc.stderr
    return proc.stderr


def test_bad_files_fail_with_a_reason(tmp_path):
    good = io.BytesIO()
    photo_like(300, 200, 3).save(good, "JPEG", quality=90)
    good = good.getvalue()
    _fails(tmp_path, b"", "DataLoss", "empty")
    _fails(tmp_path, good[: len(good) // 2], "DataLoss", "Premature end")
    # A PNG named .jpg is a PNG and is decoded (test_formats.py); a truncated one fails.
    png = io.BytesIO()
    photo_like(30, 20, 3).save(png, "PNG")
    _fails(tmp_path, png.getvalue()[: len(png.getvalue()) // 2], "DataLoss", "PNG")
    _fails(tmp_path, np.random.default_rng(0).bytes(10240), "DataLoss", "not a JPEG")
    # SOF0 declaring 60000x60000.
    huge = bytearray(good)
    i = 2
    while huge[i + 1] not in (0xC0, 0xC1, 0xC2):
        i += 2 + (huge[i + 2] << 8 | huge[i + 3])
    huge[i + 5:i + 9] = bytes([0xEA, 0x60, 0xEA, 0x60])
    _fails(tmp_path, bytes(huge), "ResourceExhausted", "60000x60000", "max_pixels")


def test_bad_command_line_exits_2(tmp_path):
    path = save_jpeg(photo_like(40, 30, 1), tmp_path / "ok.jpg", "rgb420")
    for args in (["--dtype", "int64"], ["--layout", "chw"], ["--size", "0"], ["--transform", "x"],
                 []):
        cmd = [str(TOOL), str(path)] + ([str(tmp_path / "o.raw")] if args else []) + args
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.strip(), args
