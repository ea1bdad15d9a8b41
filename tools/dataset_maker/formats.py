"""Mixed-format image folders: the formats other than JPEG that batchcast serves.

mix_formats(root, rels) rewrites the images rels (paths relative to root, in listing
order) so that image k takes variant k mod len(VARIANTS), each written with Pillow
(16-bit PNGs with a small writer of their own, as Pillow writes no 48-bit RGB PNG):

  jpeg          the JPEG as it is
  png           8-bit RGB PNG
  png16         16-bit RGB PNG (each sample v * 257 + its position's low noise)
  png-palette   palette PNG (256 colours, adaptive)
  png-gray      8-bit grayscale PNG
  png-gray16    16-bit grayscale PNG
  png-rgba      RGBA PNG (alpha a gradient; the colours as they are)
  png-la        grayscale + alpha PNG
  webp          lossy WebP, quality 90
  webp-rgba     lossless WebP with alpha
  bmp           24-bit BMP
  tiff          RGB TIFF, LZW-compressed
  tiff-gray     grayscale TIFF, uncompressed
  ppm           binary PPM (P6)
  png-as-jpeg   a PNG named .JPEG (the format is in the bytes, not the name)

File names keep their stem and take the variant's extension (.JPEG for the first and
the last). Only the standard library, numpy and Pillow are used; the output is
deterministic (the same input gives the same bytes).
"""

import io
import os
import struct
import zlib
from typing import Any, Callable

import numpy as np
from PIL import Image

EXTENSIONS = {'png': '.png', 'webp': '.webp', 'bmp': '.bmp', 'tiff': '.tiff', 'ppm': '.ppm',
              'jpeg': '.JPEG'}


def _png16(a: np.ndarray) -> bytes:
    """A 16-bit PNG of an (h, w) gray or (h, w, 3) RGB uint16 array."""
    h, w = a.shape[:2]
    color = 2 if a.ndim == 3 else 0

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack('>I', len(data)) + kind + data
                + struct.pack('>I', zlib.crc32(kind + data) & 0xffffffff))

    raw = b''.join(b'\x00' + a[y].astype('>u2').tobytes() for y in range(h))
    return (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 16, color, 0, 0, 0))
            + chunk(b'IDAT', zlib.compress(raw, 6)) + chunk(b'IEND', b''))


def _wide(a: np.ndarray) -> np.ndarray:
    """8-bit samples as 16-bit ones whose high byte is the sample (low byte varies)."""
    low = (np.arange(a.size, dtype=np.uint32).reshape(a.shape) * 37) % 256
    return (a.astype(np.uint32) << 8 | low).astype(np.uint16)


def _alpha(img: Image.Image) -> Image.Image:
    w, h = img.size
    ramp = np.linspace(40, 255, w, dtype=np.float64)[None, :].repeat(h, 0)
    return Image.fromarray(ramp.astype(np.uint8), 'L')


def _save(img: Image.Image, fmt: str, **kw: Any) -> bytes:
    out = io.BytesIO()
    img.save(out, fmt, **kw)
    return out.getvalue()


def _rgba(img: Image.Image) -> Image.Image:
    rgba = img.convert('RGB')
    rgba.putalpha(_alpha(img))
    return rgba


def _la(img: Image.Image) -> Image.Image:
    la = img.convert('L')
    la.putalpha(_alpha(img))
    return la


# variant -> (extension key, encoder of an RGB or L image)
Encoder = Callable[[Image.Image], bytes]
_VARIANTS: list[tuple[str, str, Encoder]] = [
    ('jpeg', 'jpeg', lambda img: b''),  # kept as it is
    ('png', 'png', lambda img: _save(img.convert('RGB'), 'PNG')),
    ('png16', 'png', lambda img: _png16(_wide(np.asarray(img.convert('RGB'))))),
    ('png-palette', 'png',
     lambda img: _save(img.convert('RGB').quantize(256, dither=Image.Dither.NONE), 'PNG')),
    ('png-gray', 'png', lambda img: _save(img.convert('L'), 'PNG')),
    ('png-gray16', 'png', lambda img: _png16(_wide(np.asarray(img.convert('L'))))),
    ('png-rgba', 'png', lambda img: _save(_rgba(img), 'PNG')),
    ('png-la', 'png', lambda img: _save(_la(img), 'PNG')),
    ('webp', 'webp', lambda img: _save(img.convert('RGB'), 'WEBP', quality=90, method=4)),
    ('webp-rgba', 'webp', lambda img: _save(_rgba(img), 'WEBP', lossless=True, exact=True)),
    ('bmp', 'bmp', lambda img: _save(img.convert('RGB'), 'BMP')),
    ('tiff', 'tiff', lambda img: _save(img.convert('RGB'), 'TIFF', compression='tiff_lzw')),
    ('tiff-gray', 'tiff', lambda img: _save(img.convert('L'), 'TIFF')),
    ('ppm', 'ppm', lambda img: _save(img.convert('RGB'), 'PPM')),
    ('png-as-jpeg', 'jpeg', lambda img: _save(img.convert('RGB'), 'PNG')),
]
VARIANTS = tuple(v[0] for v in _VARIANTS)


def encode(variant: str, img: Image.Image) -> tuple[bytes, str]:
    """The bytes of img (RGB or L) as `variant` (not 'jpeg') and the file extension."""
    for name, ext_key, encoder in _VARIANTS:
        if name == variant and name != 'jpeg':
            return encoder(img), EXTENSIONS[ext_key]
    raise ValueError('no variant %r to encode (one of %s)' % (variant, ', '.join(VARIANTS[1:])))


def mix_formats(root: str, rels: list[str]) -> tuple[list[str], dict[str, int], int]:
    """Rewrites image k of rels (JPEG files under root) as variant k mod len(VARIANTS).

    Returns the new relative paths (in the order of rels), the number of files of each
    variant, and the change in total bytes.
    """
    new_rels: list[str] = []
    counts = {v: 0 for v in VARIANTS}
    delta = 0
    for k, rel in enumerate(rels):
        name = VARIANTS[k % len(VARIANTS)]
        counts[name] += 1
        if name == 'jpeg':
            new_rels.append(rel)
            continue
        path = os.path.join(root, rel)
        with Image.open(path) as img:
            data, ext = encode(name, img)
        new_rel = os.path.splitext(rel)[0] + ext
        delta += len(data) - os.path.getsize(path)
        os.remove(path)
        with open(os.path.join(root, new_rel), 'wb') as f:
            f.write(data)
        new_rels.append(new_rel)
    return new_rels, counts, delta


def member_extension(data: bytes) -> str:
    """The tar member extension of an image's bytes: jpg, png, webp, bmp, tiff or ppm."""
    if data[:8] == b'\x89PNG\r\n\x1a\n':
        return 'png'
    if data[:4] == b'RIFF' and data[8:12] == b'WEBP':
        return 'webp'
    if data[:2] == b'BM':
        return 'bmp'
    if data[:4] in (b'II*\x00', b'MM\x00*'):
        return 'tiff'
    if data[:2] in (b'P5', b'P6'):
        return 'ppm'
    return 'jpg'
