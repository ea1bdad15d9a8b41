"""The regular images: sizes, content (synthesised or cropped from photos), the
encoding plan, JPEG encoding, and one image rendered and written (render_one).

Image (c, i) is drawn from its own generator seeded by (seed, c, i), so the files do
not depend on the order or the process they are rendered in.
"""

import io
import os
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from dataset_maker.common import TAG_IMAGE, TAG_PLAN, DatasetError

# Proportions of the encoding plan (exact, rounded, over all images).
P_GRAY = 0.05          # mode "L"
P_PROGRESSIVE = 0.05   # progressive JPEG
P_444 = 0.10           # of the colour images
P_422 = 0.05           # of the colour images (the rest are 4:2:0)
QUALITY_RANGE = (75, 95)
SIZE_RANGE = (300, 640)
PHOTO_MAX_SIDE = 1600
PHOTO_EXTS = ('.jpg', '.jpeg', '.png', '.bmp', '.tif', '.tiff', '.webp')

# Subsampling codes as PIL's JPEG encoder (and JpegImagePlugin.get_sampling) use them.
SUB_444, SUB_422, SUB_420 = 0, 1, 2

# Photos loaded by the parent before the workers fork: path -> RGB PIL image.
_PHOTO_CACHE: dict[str, Image.Image] = {}

# One image to render: (seed, c, i, path, gray, progressive, subsampling, photos), a
# plain tuple (picklable).
RenderJob = tuple[int, int, int, str, bool, bool, int, list[str] | None]


# --------------------------------------------------------------------------- sizes

def _draw_size(rng: np.random.Generator) -> tuple[int, int]:
    """(width, height) like ImageNet's: mostly 500 on the long side, mostly 4:3."""
    lo, hi = SIZE_RANGE
    long_side = 500 if rng.random() < 0.6 else int(rng.integers(400, hi + 1))
    u = rng.random()
    if u < 0.6:
        aspect = 4.0 / 3.0
    elif u < 0.7:
        aspect = 1.0
    else:
        aspect = float(rng.uniform(1.1, 1.8))
    short_side = int(round(long_side / aspect))
    short_side = max(lo, min(short_side, long_side))
    if rng.random() < 0.2:                 # portrait
        return short_side, long_side
    return long_side, short_side


# ----------------------------------------------------------------------- content

def _rgb(values: np.ndarray) -> tuple[int, int, int]:
    r, g, b = (int(v) for v in values)
    return r, g, b


def synth(rng: np.random.Generator, w: int, h: int, hue: float) -> Image.Image:
    """A smooth, textured, natural-ish RGB image (JPEG size tens of KB)."""
    # Colour field and shapes are drawn at half resolution; the upscale softens
    # the edges (cheaper than a blur).
    hw, hh = (w + 1) // 2, (h + 1) // 2
    gh, gw = int(rng.integers(2, 5)), int(rng.integers(2, 6))
    hsv = np.empty((gh, gw, 3))
    hsv[..., 0] = (hue + rng.normal(0.0, 0.06, (gh, gw))) % 1.0
    hsv[..., 1] = rng.uniform(0.25, 0.9, (gh, gw))
    hsv[..., 2] = rng.uniform(0.25, 1.0, (gh, gw))
    img = Image.fromarray((hsv * 255).astype(np.uint8), 'HSV').convert('RGB')
    img = img.resize((hw, hh), Image.BICUBIC)

    nshapes = int(rng.integers(3, 9))
    shsv = np.stack([(hue + rng.normal(0.0, 0.04, nshapes)) % 1.0,
                     rng.uniform(0.3, 1.0, nshapes), rng.uniform(0.2, 1.0, nshapes)], -1)
    near_hue = np.asarray(Image.fromarray((shsv[None] * 255).astype(np.uint8), 'HSV')
                          .convert('RGB'))[0]
    draw = ImageDraw.Draw(img)
    for k in range(nshapes):
        x0, y0 = rng.uniform(-0.2, 1.0) * hw, rng.uniform(-0.2, 1.0) * hh
        x1, y1 = x0 + rng.uniform(0.05, 0.5) * hw, y0 + rng.uniform(0.05, 0.5) * hh
        if rng.random() < 0.5:             # a colour near the class hue
            col = _rgb(near_hue[k])
        else:
            col = _rgb(rng.integers(0, 256, 3))
        if rng.random() < 0.6:
            draw.ellipse((x0, y0, x1, y1), fill=col)
        else:
            draw.rectangle((x0, y0, x1, y1), fill=col)
    img = img.resize((w, h), Image.BICUBIC)

    a = np.asarray(img, dtype=np.float32)
    th, tw = h // 8 + 1, w // 8 + 1        # mid-frequency texture
    tex = rng.normal(128.0, 40.0, (th, tw)).clip(0, 255).astype(np.uint8)
    tex = np.asarray(Image.fromarray(tex).resize((w, h), Image.BILINEAR), np.float32)
    noise = (tex - 128.0) * np.float32(rng.uniform(0.1, 0.4))
    noise += rng.standard_normal((h, w), dtype=np.float32) * np.float32(rng.uniform(2.0, 7.0))
    a += noise[..., None]
    return Image.fromarray(a.clip(0, 255).astype(np.uint8), 'RGB')


def _crop_photo(rng: np.random.Generator, photo: Image.Image, w: int, h: int) -> Image.Image:
    """A random crop (varied scale and aspect) of photo, resized to (w, h)."""
    pw, ph = photo.size
    area = pw * ph
    target = w / h
    box = None
    for _ in range(10):
        scale = rng.uniform(0.08, 1.0)
        aspect = target * float(np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3))))
        cw = int(round(np.sqrt(area * scale * aspect)))
        ch = int(round(np.sqrt(area * scale / aspect)))
        if 16 <= cw <= pw and 16 <= ch <= ph:
            x = int(rng.integers(0, pw - cw + 1))
            y = int(rng.integers(0, ph - ch + 1))
            box = (x, y, x + cw, y + ch)
            break
    if box is None:                        # fall back: largest centred box of the target aspect
        cw, ch = (pw, int(pw / target)) if pw / ph < target else (int(ph * target), ph)
        x, y = (pw - cw) // 2, (ph - ch) // 2
        box = (x, y, x + cw, y + ch)
    resample = Image.Resampling.LANCZOS if rng.random() < 0.5 else Image.Resampling.BILINEAR
    img = photo.resize((w, h), resample, box=box)
    if rng.random() < 0.5:
        img = img.transpose(Image.FLIP_LEFT_RIGHT)
    return img


def encode_jpeg(img: Image.Image, quality: int, subsampling: int, progressive: bool) -> bytes:
    buf = io.BytesIO()
    kw: dict[str, Any] = dict(quality=int(quality), progressive=bool(progressive))
    if img.mode != 'L':
        kw['subsampling'] = int(subsampling)
    img.save(buf, 'JPEG', **kw)
    return buf.getvalue()


def _class_hue(c: int) -> float:
    return (c * 0.6180339887) % 1.0        # golden-ratio spacing: neighbours differ


def render_one(job: RenderJob) -> tuple[int, int, int]:
    """Render and write one image; (c, i, bytes written)."""
    (seed, c, i, path, gray, progressive, subsampling, photos) = job
    rng = np.random.default_rng([seed, TAG_IMAGE, c, i])
    w, h = _draw_size(rng)
    quality = int(rng.integers(QUALITY_RANGE[0], QUALITY_RANGE[1] + 1))
    if photos:
        # Each class mostly crops "its own" photo, so classes are learnable.
        k = c % len(photos) if rng.random() < 0.7 else int(rng.integers(len(photos)))
        img = _crop_photo(rng, load_photo(photos[k]), w, h)
    else:
        img = synth(rng, w, h, _class_hue(c))
    if gray:
        img = img.convert('L')
    data = encode_jpeg(img, quality, subsampling, progressive)
    with open(path, 'wb') as f:
        f.write(data)
    return c, i, len(data)


# ------------------------------------------------------------------------ photos

def list_photos(photo_dir: str) -> list[str]:
    """The absolute paths of the image files in photo_dir, sorted."""
    if not os.path.isdir(photo_dir):
        raise DatasetError('--photos: %s is not a directory' % photo_dir)
    names = sorted(n for n in os.listdir(photo_dir)
                   if n.lower().endswith(PHOTO_EXTS)
                   and os.path.isfile(os.path.join(photo_dir, n)))
    if not names:
        raise DatasetError('--photos: no image files (%s) in %s'
                           % (', '.join(PHOTO_EXTS), photo_dir))
    return [os.path.abspath(os.path.join(photo_dir, n)) for n in names]


def load_photo(path: str) -> Image.Image:
    """The photo at path as RGB, at most PHOTO_MAX_SIDE on a side (loaded once)."""
    img = _PHOTO_CACHE.get(path)
    if img is not None:
        return img
    try:
        with Image.open(path) as src:
            src.draft('RGB', (PHOTO_MAX_SIDE, PHOTO_MAX_SIDE))   # fast DCT downscale
            img = src.convert('RGB')
    except (OSError, ValueError, Image.DecompressionBombError) as e:
        raise DatasetError('cannot read photo %s: %s' % (path, e)) from None
    if max(img.size) > PHOTO_MAX_SIDE:
        img.thumbnail((PHOTO_MAX_SIDE, PHOTO_MAX_SIDE), Image.LANCZOS)
    if min(img.size) < 32:
        raise DatasetError('photo %s is too small (%dx%d)' % ((path,) + img.size))
    _PHOTO_CACHE[path] = img
    return img


# ---------------------------------------------------------------------- the plan

def plan(seed: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exact-proportion encoding plan: (gray, progressive, subsampling) arrays."""
    rng = np.random.default_rng([seed, TAG_PLAN, n])

    def count(p: float, m: int) -> int:
        k = int(round(p * m))
        return max(k, 1) if m >= 10 and p > 0 else k

    gray = np.zeros(n, bool)
    gray[rng.permutation(n)[:count(P_GRAY, n)]] = True
    progressive = np.zeros(n, bool)
    progressive[rng.permutation(n)[:count(P_PROGRESSIVE, n)]] = True
    sub = np.full(n, SUB_420, np.int64)
    colour = np.flatnonzero(~gray)
    colour = colour[rng.permutation(len(colour))]
    k444, k422 = count(P_444, len(colour)), count(P_422, len(colour))
    sub[colour[:k444]] = SUB_444
    sub[colour[k444:k444 + k422]] = SUB_422
    return gray, progressive, sub
