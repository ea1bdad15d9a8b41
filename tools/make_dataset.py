#!/usr/bin/env python3
"""Make an ImageNet-like folder of JPEG files for tests, demos and benchmarks.

    make_dataset.py OUT_DIR [--photos DIR] [--classes N] [--per-class M] [--seed S]
                    [--hazards] [--decode-failures K] [--formats jpeg|mixed]
                    [--tsv FILE] [--force]
                    [--workers W] [--quiet]
                    [--shards N [--from-folder DIR] [--label-format cls|json|txt]
                     [--hostile-shards]]

Layout: OUT_DIR/<class>/<class>_<i>.JPEG with class names n00000000, n00000001, ...
(sorted order = label order, as torchvision's ImageFolder assigns labels).

Images are about 500x375 (width and height in [300, 640], mostly landscape 4:3,
some portrait), JPEG quality uniform in 75..95, chroma subsampling 4:2:0 for about
85% of the colour images, 4:4:4 for 10% and 4:2:2 for 5%; 5% are grayscale and 5%
progressive. With --photos each image is a random crop of one of the photos in DIR;
without it, images are synthesised (smooth gradients, shapes, texture, noise), each
class with its own dominant hue.

Everything is deterministic from --seed: the same options give byte-identical files,
whatever the number of worker processes (image (c, i) is drawn from its own
generator seeded by (seed, c, i); the grayscale/progressive/subsampling assignment is
an exact-proportion plan drawn from (seed, N)).

--hazards adds files a loader must survive to the first class folder:
  hazard_truncated.JPEG  valid JPEG cut at half its length      (invalid)
  hazard_empty.JPEG      0 bytes                                (invalid)
  hazard_png.JPEG        a PNG file named .JPEG                 (VALID: a PNG, whatever its name)
  hazard_cmyk.JPEG       a CMYK JPEG (Adobe APP14)              (VALID: must decode to RGB)
  hazard_random.JPEG     10 KiB of random bytes                 (invalid)
  hazard_huge.JPEG       small JPEG whose SOF header declares 60000x60000 (invalid)

--decode-failures K adds K files whose JPEG header is valid but whose data fails
to decode (a loader sees them fail only when it decodes, not when it scans headers),
one per class folder in turn (file k in class k mod N), alternately:
  hazard_decode_<k>_truncated.JPEG  valid JPEG cut at 60% of its length (no EOI marker)
  hazard_decode_<k>_corrupt.JPEG    a restart marker written over the first bytes of the
                                    entropy-coded data (the file still ends with EOI)
Each is a different image, so a sample shown in place of another is caught.

--formats mixed rewrites the images in turn as the other formats batchcast serves
(tools/dataset_maker/formats.py): image k (in listing order) becomes variant k mod 15
of jpeg, png, png16, png-palette, png-gray, png-gray16, png-rgba, png-la, webp,
webp-rgba, bmp, tiff, tiff-gray, ppm and png-as-jpeg (a PNG named .JPEG); the files
take the variant's extension (.png, .webp, .bmp, .tiff, .ppm; .JPEG for the first and
the last). The summary's 'formats' counts the files of each variant.

--shards N writes OUT_DIR as WebDataset tar shards instead of a folder:
OUT_DIR/train-000000.tar, ... of N samples each (the last may hold fewer), made
from the images of --from-folder DIR (an existing ImageFolder tree) or of a folder
generated with the other options. Samples are the folder's images in its listing
order (class folders sorted, files sorted: the order batchcast lists a folder in,
so sample k of the shards has the folder's index k), keys 000000, 000001, ...,
members KEY.jpg (the file's bytes; KEY.png, KEY.webp, KEY.bmp, KEY.tiff or KEY.ppm
for an image of that format, told from its bytes) and the label: KEY.cls (the class index as
text, the default), KEY.json ({"label": c}) or KEY.txt (--label-format). Members
have mtime 0 and owner 0, so the tars are byte-identical for the same input.
--hostile-shards adds two shards after the others (names follow the pattern):
  shard N+0: hostile_ok_0 (a valid sample), hostile_notjpeg (a .jpg of random
             bytes), hostile_nolabel (an image without a label member),
             hostile_ok_1 (valid)
  shard N+1: hostile_trunc_0, hostile_trunc_1 (valid), hostile_trunc_2, whose image
             the file is cut in the middle of: a truncated tar
So a server on them serves 4 extra samples, drops 2 at scan and counts one
damaged shard.

The dataset is written into a temporary sibling folder and renamed into place at
the end, so an interrupted run leaves no half-written OUT_DIR.

Exit status: 0 success, 1 runtime failure (OUT_DIR not empty, unreadable photos,
I/O error), 2 bad command line, 130 interrupted.

Python use:  make_dataset(out_dir, photos=None, classes=10, per_class=20, seed=0,
                          hazards=False, tsv=None, force=False, decode_failures=0,
                          formats='jpeg') -> dict
             make_shards(folder, out_dir, per_shard=100, label_format='cls',
                         hostile=False, force=False) -> dict
Only the standard library, numpy and Pillow are needed.
"""

import argparse
import io
import multiprocessing
import os
import shutil
import sys
import tarfile
import tempfile
import time
import types

import numpy as np
from PIL import Image, ImageDraw

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dataset_maker import formats as dataset_formats  # noqa: E402

# Proportions of the encoding plan (exact, rounded, over all images).
P_GRAY = 0.05          # mode "L"
P_PROGRESSIVE = 0.05   # progressive JPEG
P_444 = 0.10           # of the colour images
P_422 = 0.05           # of the colour images (the rest are 4:2:0)
QUALITY_RANGE = (75, 95)
SIZE_RANGE = (300, 640)
PHOTO_MAX_SIDE = 1600
PHOTO_EXTS = ('.jpg', '.jpeg', '.png', '.bmp', '.tif', '.tiff', '.webp')
HUGE_SIDE = 60000
POOL_THRESHOLD = 100   # use worker processes from this many images on

# Subsampling codes as PIL's JPEG encoder (and JpegImagePlugin.get_sampling) use them.
SUB_444, SUB_422, SUB_420 = 0, 1, 2

# Seed-sequence tags keep the streams of images, plan and hazards apart.
_TAG_IMAGE, _TAG_PLAN, _TAG_HAZARD, _TAG_DECODE_FAILURE = 0, 1, 2, 3
DECODE_FAILURE_KINDS = ('truncated', 'corrupt')

HAZARD_NAMES = ('truncated', 'empty', 'png', 'cmyk', 'random', 'huge')
FORMATS = ('jpeg', 'mixed')

# Photos loaded by the parent before the workers fork: path -> RGB PIL image.
_PHOTO_CACHE = {}


class DatasetError(Exception):
    """A runtime failure with a message meant for the user."""


def class_name(c):
    return 'n%08d' % c


# --------------------------------------------------------------------------- sizes

def _draw_size(rng):
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

def _synth(rng, w, h, hue):
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
            col = tuple(int(v) for v in near_hue[k])
        else:
            col = tuple(int(v) for v in rng.integers(0, 256, 3))
        if rng.random() < 0.6:
            draw.ellipse([x0, y0, x1, y1], fill=col)
        else:
            draw.rectangle([x0, y0, x1, y1], fill=col)
    img = img.resize((w, h), Image.BICUBIC)

    a = np.asarray(img, dtype=np.float32)
    th, tw = h // 8 + 1, w // 8 + 1        # mid-frequency texture
    tex = rng.normal(128.0, 40.0, (th, tw)).clip(0, 255).astype(np.uint8)
    tex = np.asarray(Image.fromarray(tex).resize((w, h), Image.BILINEAR), np.float32)
    noise = (tex - 128.0) * np.float32(rng.uniform(0.1, 0.4))
    noise += rng.standard_normal((h, w), dtype=np.float32) * np.float32(rng.uniform(2.0, 7.0))
    a += noise[..., None]
    return Image.fromarray(a.clip(0, 255).astype(np.uint8), 'RGB')


def _crop_photo(rng, photo, w, h):
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
    resample = Image.LANCZOS if rng.random() < 0.5 else Image.BILINEAR
    img = photo.resize((w, h), resample, box=box)
    if rng.random() < 0.5:
        img = img.transpose(Image.FLIP_LEFT_RIGHT)
    return img


def _encode_jpeg(img, quality, subsampling, progressive):
    buf = io.BytesIO()
    kw = dict(quality=int(quality), progressive=bool(progressive))
    if img.mode != 'L':
        kw['subsampling'] = int(subsampling)
    img.save(buf, 'JPEG', **kw)
    return buf.getvalue()


def _class_hue(c):
    return (c * 0.6180339887) % 1.0        # golden-ratio spacing: neighbours differ


def _render_one(job):
    """Render and write one image. job is a plain tuple (picklable)."""
    (seed, c, i, path, gray, progressive, subsampling, photos) = job
    rng = np.random.default_rng([seed, _TAG_IMAGE, c, i])
    w, h = _draw_size(rng)
    quality = int(rng.integers(QUALITY_RANGE[0], QUALITY_RANGE[1] + 1))
    if photos:
        # Each class mostly crops "its own" photo, so classes are learnable.
        k = c % len(photos) if rng.random() < 0.7 else int(rng.integers(len(photos)))
        img = _crop_photo(rng, _load_photo(photos[k]), w, h)
    else:
        img = _synth(rng, w, h, _class_hue(c))
    if gray:
        img = img.convert('L')
    data = _encode_jpeg(img, quality, subsampling, progressive)
    with open(path, 'wb') as f:
        f.write(data)
    return c, i, len(data)


# ------------------------------------------------------------------------ photos

def _list_photos(photo_dir):
    if not os.path.isdir(photo_dir):
        raise DatasetError('--photos: %s is not a directory' % photo_dir)
    names = sorted(n for n in os.listdir(photo_dir)
                   if n.lower().endswith(PHOTO_EXTS)
                   and os.path.isfile(os.path.join(photo_dir, n)))
    if not names:
        raise DatasetError('--photos: no image files (%s) in %s'
                           % (', '.join(PHOTO_EXTS), photo_dir))
    return [os.path.abspath(os.path.join(photo_dir, n)) for n in names]


def _load_photo(path):
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


# ----------------------------------------------------------------------- hazards

def _patch_sof_size(data, width, height):
    """Overwrite the frame size of the first SOF0/SOF2 header; walks the markers."""
    b = bytearray(data)
    if b[:2] != b'\xff\xd8':
        raise ValueError('not a JPEG')
    pos = 2
    while pos + 4 <= len(b):
        if b[pos] != 0xFF:
            raise ValueError('bad JPEG marker at %d' % pos)
        marker = b[pos + 1]
        if marker == 0xFF:                 # fill byte
            pos += 1
            continue
        seglen = (b[pos + 2] << 8) | b[pos + 3]
        if marker in (0xC0, 0xC2):
            # FF Cn | Lf(2) | P(1) | Y(2) height | X(2) width
            b[pos + 5:pos + 7] = height.to_bytes(2, 'big')
            b[pos + 7:pos + 9] = width.to_bytes(2, 'big')
            return bytes(b)
        if marker == 0xDA:
            break
        pos += 2 + seglen
    raise ValueError('no SOF0/SOF2 marker found')


def _hazard_bytes(seed):
    """name -> bytes of each hazard file."""
    rng = np.random.default_rng([seed, _TAG_HAZARD])
    base = _synth(rng, 500, 375, 0.0)
    out = {}
    valid = _encode_jpeg(base, 90, SUB_420, False)
    out['truncated'] = valid[:len(valid) // 2]
    out['empty'] = b''
    buf = io.BytesIO()
    base.resize((250, 188), Image.BILINEAR).save(buf, 'PNG')
    out['png'] = buf.getvalue()
    buf = io.BytesIO()
    base.convert('CMYK').save(buf, 'JPEG', quality=90)
    out['cmyk'] = buf.getvalue()
    rnd = bytearray(rng.integers(0, 256, 10240, dtype=np.uint8).tobytes())
    if rnd[:2] == b'\xff\xd8':             # keep it from even looking like a JPEG
        rnd[0] = 0
    out['random'] = bytes(rnd)
    small = _encode_jpeg(base.resize((64, 48), Image.BILINEAR), 90, SUB_420, False)
    out['huge'] = _patch_sof_size(small, HUGE_SIDE, HUGE_SIDE)
    return out


def _corrupt_entropy_data(data):
    """A restart marker (FF D3) written over bytes 16-17 of the entropy-coded data.

    The header stays valid and the file still ends with EOI, but libjpeg stops at the
    unexpected marker (and reports it) wherever a decode starts: every crop decodes
    the first MCU row, which holds the damage."""
    b = bytearray(data)
    pos = 2
    while pos + 4 <= len(b):
        if b[pos] != 0xFF:
            raise ValueError('bad JPEG marker at %d' % pos)
        marker = b[pos + 1]
        if marker == 0xFF:
            pos += 1
            continue
        seglen = (b[pos + 2] << 8) | b[pos + 3]
        if marker == 0xDA:
            at = pos + 2 + seglen + 16
            b[at:at + 2] = b'\xff\xd3'
            return bytes(b)
        pos += 2 + seglen
    raise ValueError('no SOS marker found')


def _decode_failure_bytes(seed, k):
    """(kind, bytes) of decode-failure file k: its own image, then broken."""
    rng = np.random.default_rng([seed, _TAG_DECODE_FAILURE, k])
    img = _synth(rng, 320, 240, (k * 0.37) % 1.0)
    valid = _encode_jpeg(img, 90, SUB_420, False)
    kind = DECODE_FAILURE_KINDS[k % len(DECODE_FAILURE_KINDS)]
    if kind == 'truncated':
        return kind, valid[:len(valid) * 3 // 5]
    return kind, _corrupt_entropy_data(valid)


# ---------------------------------------------------------------------- the plan

def _plan(seed, n):
    """Exact-proportion encoding plan: (gray, progressive, subsampling) arrays."""
    rng = np.random.default_rng([seed, _TAG_PLAN, n])

    def count(p, m):
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


# --------------------------------------------------------------------- processes

def _picklable_worker():
    """Make _render_one picklable by reference even if this file was loaded with
    importlib without registering it in sys.modules (as tests do)."""
    mod = sys.modules.get(__name__)
    if mod is None:
        shim = types.ModuleType(__name__)
        shim._render_one = _render_one
        sys.modules[__name__] = shim
        return True
    return getattr(mod, '_render_one', None) is _render_one


def _run_jobs(jobs, workers):
    """Run the jobs, in a fork Pool when asked and possible; yields results."""
    use_pool = (workers > 1 and len(jobs) > 1
                and 'fork' in multiprocessing.get_all_start_methods()
                and _picklable_worker())
    if not use_pool:
        for job in jobs:
            yield _render_one(job)
        return
    ctx = multiprocessing.get_context('fork')
    chunk = max(1, min(32, len(jobs) // (workers * 8)))
    pool = ctx.Pool(workers)
    try:
        for r in pool.imap_unordered(_render_one, jobs, chunksize=chunk):
            yield r
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()


# ------------------------------------------------------------------- the dataset

def _check_out_dir(out_dir, force, photo_dir):
    """Raise DatasetError unless out_dir may be (re)placed."""
    if os.path.lexists(out_dir) and not os.path.isdir(out_dir):
        raise DatasetError('%s exists and is not a directory' % out_dir)
    if not os.path.isdir(out_dir) or not os.listdir(out_dir):
        return
    if not force:
        raise DatasetError('%s exists and is not empty (use --force to replace it)'
                           % out_dir)
    real = os.path.realpath(out_dir)
    protected = {os.path.realpath(os.sep), os.path.realpath(os.path.expanduser('~'))}
    cwd = os.path.realpath(os.getcwd())
    if (real in protected or cwd == real or cwd.startswith(real.rstrip(os.sep) + os.sep)):
        raise DatasetError('refusing to replace %s (root, home, or the current '
                           'directory or one of its parents)' % out_dir)
    if photo_dir:
        pr = os.path.realpath(photo_dir)
        if pr == real or pr.startswith(real.rstrip(os.sep) + os.sep):
            raise DatasetError('refusing to replace %s: it contains the --photos folder'
                               % out_dir)


def _default_umask():
    old = os.umask(0o022)
    os.umask(old)
    return old


def make_dataset(out_dir, photos=None, classes=10, per_class=20, seed=0,
                 hazards=False, tsv=None, force=False, workers=None, decode_failures=0,
                 formats='jpeg'):
    """Write the dataset; returns the summary as a dict.

    Keys: out_dir, classes, class_names, per_class, images, total_bytes, grayscale,
    progressive, sub_444, sub_422, sub_420, hazards (list of absolute paths),
    hazard_files (kind -> path), decode_failures (list of absolute paths, file k
    at k), formats (variant -> files: {'jpeg': images} unless formats='mixed'), tsv,
    workers, elapsed_s.
    Raises ValueError on bad arguments and DatasetError on runtime failures.
    workers: processes to use (None: os.cpu_count() for large sets, 1: no pool).
    """
    t0 = time.monotonic()
    for name, v, lo in (('classes', classes, 1), ('per_class', per_class, 1), ('seed', seed, 0),
                        ('decode_failures', decode_failures, 0)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise ValueError('%s must be an integer >= %d, got %r' % (name, lo, v))
    if classes > 10 ** 8:
        raise ValueError('classes must be at most 10^8')
    if formats not in FORMATS:
        raise ValueError('formats must be one of %s, got %r' % (', '.join(FORMATS), formats))
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise ValueError('workers must be a positive integer, got %r' % (workers,))
    classes, per_class, seed = int(classes), int(per_class), int(seed)
    decode_failures = int(decode_failures)

    out_dir = os.path.abspath(os.fspath(out_dir))
    if tsv is not None:
        tsv = os.path.abspath(os.fspath(tsv))
        if os.path.isdir(tsv):
            raise ValueError('tsv: %s is a directory' % tsv)
        if any(ch in out_dir for ch in '\t\n\r'):
            raise ValueError('output path contains a tab or newline; cannot write a TSV')
    photo_list = _list_photos(os.fspath(photos)) if photos else None
    _check_out_dir(out_dir, force, photos and os.fspath(photos))

    n = classes * per_class
    if workers is None:
        workers = (os.cpu_count() or 1) if n >= POOL_THRESHOLD else 1
    if photo_list:                         # load before forking: workers share them
        for p in photo_list:
            _load_photo(p)

    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix='.%s.tmp-' % os.path.basename(out_dir), dir=parent)
    try:
        os.chmod(tmp, 0o777 & ~_default_umask())
        names = [class_name(c) for c in range(classes)]
        for nm in names:
            os.mkdir(os.path.join(tmp, nm))
        width = max(4, len(str(per_class - 1)))
        gray, prog, sub = _plan(seed, n)
        jobs, files = [], {}
        for c in range(classes):
            for i in range(per_class):
                k = c * per_class + i
                rel = os.path.join(names[c], '%s_%0*d.JPEG' % (names[c], width, i))
                files[(c, i)] = rel
                jobs.append((seed, c, i, os.path.join(tmp, rel),
                             bool(gray[k]), bool(prog[k]), int(sub[k]), photo_list))
        total = 0
        for c, i, nbytes in _run_jobs(jobs, workers):
            total += nbytes
        format_counts = {'jpeg': n}
        if formats == 'mixed':
            keys = sorted(files)
            rels, format_counts, delta = dataset_formats.mix_formats(tmp, [files[k] for k in keys])
            files = dict(zip(keys, rels))
            total += delta

        entries = [(c, rel) for (c, _i), rel in sorted(files.items())]
        hazard_files = {}
        if hazards:
            for kind, data in _hazard_bytes(seed).items():
                rel = os.path.join(names[0], 'hazard_%s.JPEG' % kind)
                with open(os.path.join(tmp, rel), 'wb') as f:
                    f.write(data)
                total += len(data)
                hazard_files[kind] = os.path.join(out_dir, rel)
                entries.append((0, rel))
        failure_files = []
        for k in range(decode_failures):
            kind, data = _decode_failure_bytes(seed, k)
            c = k % classes
            rel = os.path.join(names[c], 'hazard_decode_%d_%s.JPEG' % (k, kind))
            with open(os.path.join(tmp, rel), 'wb') as f:
                f.write(data)
            total += len(data)
            failure_files.append(os.path.join(out_dir, rel))
            entries.append((c, rel))

        # Move into place (re-check: someone may have written there meanwhile).
        _check_out_dir(out_dir, force, photos and os.fspath(photos))
        if os.path.isdir(out_dir):
            if os.listdir(out_dir):
                shutil.rmtree(out_dir)
            else:
                os.rmdir(out_dir)
        os.rename(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

    if tsv is not None:
        entries.sort(key=lambda e: (e[0], e[1]))
        os.makedirs(os.path.dirname(tsv), exist_ok=True)
        with open(tsv, 'w', encoding='utf-8') as f:
            for label, rel in entries:
                f.write('%s\t%d\n' % (os.path.join(out_dir, rel), label))

    return {
        'out_dir': out_dir,
        'classes': classes,
        'class_names': names,
        'per_class': per_class,
        'images': n,
        'total_bytes': total,
        'grayscale': int(gray.sum()),
        'progressive': int(prog.sum()),
        'sub_444': int(((sub == SUB_444) & ~gray).sum()),
        'sub_422': int(((sub == SUB_422) & ~gray).sum()),
        'sub_420': int(((sub == SUB_420) & ~gray).sum()),
        'hazards': [hazard_files[k] for k in HAZARD_NAMES if k in hazard_files],
        'hazard_files': hazard_files,
        'decode_failures': failure_files,
        'formats': format_counts,
        'tsv': tsv,
        'workers': workers,
        'elapsed_s': time.monotonic() - t0,
    }


# ------------------------------------------------------------------ tar shards

IMAGE_EXTS = ('.jpg', '.jpeg', '.png', '.ppm', '.bmp', '.pgm', '.tif', '.tiff', '.webp')
LABEL_FORMATS = ('cls', 'json', 'txt')
SHARD_PREFIX = 'train-'


def _list_folder(folder):
    """(path, label) of an ImageFolder tree in batchcast's listing order."""
    classes = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)))
    if not classes:
        raise DatasetError('%s has no class subfolders' % folder)
    out = []
    for label, c in enumerate(classes):
        files = []
        for root, _dirs, names in os.walk(os.path.join(folder, c), followlinks=True):
            files += [os.path.join(root, n) for n in names
                      if os.path.splitext(n)[1].lower() in IMAGE_EXTS]
        out += [(p, label) for p in sorted(files)]
    return out


def _label_member(key, label, label_format):
    if label_format == 'json':
        return key + '.json', ('{"label": %d}' % label).encode()
    return key + '.' + label_format, ('%d\n' % label).encode()


def _add(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 0
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def _write_shard(path, samples):
    """samples: (key, [(member name, bytes), ...]) in order."""
    with tarfile.open(path, 'w', format=tarfile.USTAR_FORMAT) as tar:
        for _key, members in samples:
            for name, data in members:
                _add(tar, name, data)


def make_shards(folder, out_dir, per_shard=100, label_format='cls', hostile=False, force=False):
    """Packs the ImageFolder tree `folder` into WebDataset tar shards in out_dir.

    Keys: shards (paths), pattern (the brace pattern naming them all), samples
    (valid samples in the regular shards), hostile (dict: extra samples served,
    dropped at scan, damaged shards; None without hostile), per_shard.
    Raises ValueError on bad arguments and DatasetError on runtime failures."""
    if isinstance(per_shard, bool) or not isinstance(per_shard, int) or per_shard < 1:
        raise ValueError('per_shard must be a positive integer, got %r' % (per_shard,))
    if label_format not in LABEL_FORMATS:
        raise ValueError('label_format must be one of %s, got %r' % (LABEL_FORMATS, label_format))
    folder = os.path.abspath(os.fspath(folder))
    out_dir = os.path.abspath(os.fspath(out_dir))
    if not os.path.isdir(folder):
        raise DatasetError('%s is not a directory' % folder)
    entries = _list_folder(folder)
    _check_out_dir(out_dir, force, folder)
    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix='.%s.tmp-' % os.path.basename(out_dir), dir=parent)
    names = []
    try:
        os.chmod(tmp, 0o777 & ~_default_umask())
        samples = []
        for k, (path, label) in enumerate(entries):
            key = '%06d' % k
            with open(path, 'rb') as f:
                data = f.read()
            member = key + '.' + dataset_formats.member_extension(data)
            samples.append((key, [(member, data), _label_member(key, label, label_format)]))
        shards = [samples[i:i + per_shard] for i in range(0, len(samples), per_shard)]
        for i, chunk in enumerate(shards):
            names.append('%s%06d.tar' % (SHARD_PREFIX, i))
            _write_shard(os.path.join(tmp, names[-1]), chunk)
        hostile_info = None
        if hostile:
            good = [open(entries[i % len(entries)][0], 'rb').read() for i in range(5)]
            rng = np.random.default_rng(np.random.SeedSequence([0, _TAG_HAZARD, 7]))

            def sample(key, image, label=0):
                members = [(key + '.jpg', image)]
                if label is not None:
                    members.append(_label_member(key, label, label_format))
                return key, members

            names.append('%s%06d.tar' % (SHARD_PREFIX, len(shards)))
            _write_shard(os.path.join(tmp, names[-1]), [
                sample('hostile_ok_0', good[0]),
                sample('hostile_notjpeg', rng.integers(0, 256, 4096, dtype=np.uint8).tobytes()),
                sample('hostile_nolabel', good[1], label=None),
                sample('hostile_ok_1', good[2], label=1)])
            names.append('%s%06d.tar' % (SHARD_PREFIX, len(shards) + 1))
            trunc = os.path.join(tmp, names[-1])
            _write_shard(trunc, [sample('hostile_trunc_0', good[3]),
                                 sample('hostile_trunc_1', good[4], label=1),
                                 sample('hostile_trunc_2', good[0])])
            # Cut in the middle of the last sample's image data.
            with tarfile.open(trunc) as t:
                member = t.getmember('hostile_trunc_2.jpg')
            with open(trunc, 'r+b') as f:
                f.truncate(member.offset_data + member.size // 2)
            hostile_info = {'served': 4, 'dropped_at_scan': 2, 'damaged_shards': 1}
        if os.path.isdir(out_dir):
            shutil.rmtree(out_dir)
        os.rename(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    last = len(names) - 1
    return {
        'shards': [os.path.join(out_dir, n) for n in names],
        'pattern': os.path.join(out_dir, '%s{000000..%06d}.tar' % (SHARD_PREFIX, last)),
        'samples': len(entries),
        'per_shard': per_shard,
        'hostile': hostile_info,
    }


def summary_line(s):
    failures = len(s.get('decode_failures', ()))
    mixed = s.get('formats', {})
    formats = ('formats ' + ' '.join('%s:%d' % (k, v) for k, v in mixed.items() if v) + ', '
               if len(mixed) > 1 else '')
    return ('%d images, %d classes, %d bytes (%.1f MB), grayscale %d, progressive %d, '
            '4:4:4 %d, 4:2:2 %d, hazards %d, %s%s%.2f s'
            % (s['images'], s['classes'], s['total_bytes'], s['total_bytes'] / 1e6,
               s['grayscale'], s['progressive'], s['sub_444'], s['sub_422'],
               len(s['hazards']), 'decode failures %d, ' % failures if failures else '',
               formats, s['elapsed_s']))


# --------------------------------------------------------------------------- CLI

def _int_at_least(minimum):
    """An argparse type: an integer >= minimum."""
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError('not an integer: %r' % text) from None
        if v < minimum:
            raise argparse.ArgumentTypeError('must be >= %d, got %d' % (minimum, v))
        return v
    return parse


_positive = _int_at_least(1)
_non_negative = _int_at_least(0)


def _parser():
    p = argparse.ArgumentParser(
        prog='make_dataset.py',
        description='Make an ImageNet-like folder of JPEG files '
                    '(OUT_DIR/<class>/<name>.JPEG) for tests, demos and benchmarks.')
    p.add_argument('out_dir', metavar='OUT_DIR', help='folder to create (must not exist or be empty)')
    p.add_argument('--photos', metavar='DIR',
                   help='crop images from the photos in DIR (the project has some in '
                        '../shared/data/photos, from the repository root); '
                        'default: synthesise them')
    p.add_argument('--classes', metavar='N', type=_positive, default=10, help='classes (default 10)')
    p.add_argument('--per-class', metavar='M', type=_positive, default=20,
                   help='images per class (default 20)')
    p.add_argument('--seed', metavar='S', type=_non_negative, default=0, help='seed (default 0)')
    p.add_argument('--hazards', action='store_true',
                   help='also write broken/odd files (truncated, empty, PNG, CMYK, random, '
                        'huge header) into the first class folder')
    p.add_argument('--decode-failures', metavar='K', type=_non_negative, default=0,
                   help='also write K files with a valid header whose data fails to decode '
                        '(truncated, corrupt entropy data), one per class folder in turn')
    p.add_argument('--formats', choices=FORMATS, default='jpeg',
                   help='mixed: rewrite the images in turn as PNG (8/16-bit, palette, gray, '
                        'alpha), WebP, BMP, TIFF, PPM and a PNG named .JPEG (default: jpeg)')
    p.add_argument('--tsv', metavar='FILE', help='also write "absolute_path<TAB>label" lines')
    p.add_argument('--force', action='store_true', help='replace OUT_DIR if it is not empty')
    p.add_argument('--workers', metavar='W', type=_positive, default=None,
                   help='worker processes (default: CPU count for %d+ images, else 1)'
                        % POOL_THRESHOLD)
    p.add_argument('--quiet', action='store_true', help='print nothing on success')
    p.add_argument('--shards', metavar='N', type=_positive, default=None,
                   help='write OUT_DIR as WebDataset tar shards of N samples each '
                        '(train-000000.tar, ...) instead of a folder')
    p.add_argument('--from-folder', metavar='DIR',
                   help='with --shards: pack the images of this ImageFolder tree '
                        '(default: generate them with the options above)')
    p.add_argument('--label-format', choices=LABEL_FORMATS, default='cls',
                   help='with --shards: the label member, KEY.cls (default), KEY.json or KEY.txt')
    p.add_argument('--hostile-shards', action='store_true',
                   help='with --shards: add a shard with a non-JPEG image and a sample '
                        'without label, and a truncated shard')
    return p


def main(argv=None):
    parser = _parser()
    args = parser.parse_args(argv)
    prog = 'make_dataset.py'
    if args.photos is not None and not os.path.isdir(args.photos):
        parser.error('--photos: %s is not a directory' % args.photos)
    if args.tsv is not None and os.path.isdir(args.tsv):
        parser.error('--tsv: %s is a directory' % args.tsv)
    if args.shards is None and (args.from_folder or args.hostile_shards):
        parser.error('--from-folder and --hostile-shards need --shards N')
    if args.shards is not None:
        return _main_shards(args, prog)
    s = _run(prog, lambda: make_dataset(
        args.out_dir, photos=args.photos, classes=args.classes, per_class=args.per_class,
        seed=args.seed, hazards=args.hazards, tsv=args.tsv, force=args.force,
        workers=args.workers, decode_failures=args.decode_failures, formats=args.formats))
    if isinstance(s, int):
        return s
    if not args.quiet:
        if s['hazards']:
            print('hazard files:')
            for path in s['hazards']:
                print('  ' + path)
        if s['decode_failures']:
            print('files that fail to decode:')
            for path in s['decode_failures']:
                print('  ' + path)
        if s['tsv']:
            print('file list: ' + s['tsv'])
        print(summary_line(s))
    return 0


def _run(prog, fn):
    """fn()'s result, or the exit status of its failure (after the message)."""
    try:
        return fn()
    except (DatasetError, ValueError, OSError) as e:
        print('%s: error: %s' % (prog, e), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print('%s: interrupted' % prog, file=sys.stderr)
        return 130


def _shards_from_args(args):
    tmp = None
    folder = args.from_folder
    try:
        if folder is None:
            tmp = tempfile.mkdtemp(prefix='.make_dataset-')
            folder = os.path.join(tmp, 'images')
            make_dataset(folder, photos=args.photos, classes=args.classes,
                         per_class=args.per_class, seed=args.seed, hazards=args.hazards,
                         workers=args.workers, decode_failures=args.decode_failures,
                         formats=args.formats)
        return make_shards(folder, args.out_dir, per_shard=args.shards,
                           label_format=args.label_format, hostile=args.hostile_shards,
                           force=args.force)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _main_shards(args, prog):
    s = _run(prog, lambda: _shards_from_args(args))
    if isinstance(s, int):
        return s
    if not args.quiet:
        print('%d samples in %d shards: %s' % (s['samples'], len(s['shards']), s['pattern']))
    return 0


if __name__ == '__main__':
    sys.exit(main())
