"""Files a loader must survive: the hazard files (--hazards), files whose header is
valid but whose data fails to decode (--decode-failures), and hostile tar shards
(--hostile-shards). All deterministic from the seed."""

import io
from typing import Sequence

import numpy as np
from PIL import Image

from dataset_maker.common import TAG_DECODE_FAILURE, TAG_HAZARD, Shard, ShardSample
from dataset_maker.images import SUB_420, encode_jpeg, synth

HAZARD_NAMES = ('truncated', 'empty', 'png', 'cmyk', 'random', 'huge')
HUGE_SIDE = 60000
DECODE_FAILURE_KINDS = ('truncated', 'corrupt')


# ----------------------------------------------------------------------- hazards

def patch_sof_size(data: bytes, width: int, height: int) -> bytes:
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


def hazard_bytes(seed: int) -> dict[str, bytes]:
    """name -> bytes of each hazard file (HAZARD_NAMES, in that order)."""
    rng = np.random.default_rng([seed, TAG_HAZARD])
    base = synth(rng, 500, 375, 0.0)
    out = {}
    valid = encode_jpeg(base, 90, SUB_420, False)
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
    small = encode_jpeg(base.resize((64, 48), Image.BILINEAR), 90, SUB_420, False)
    out['huge'] = patch_sof_size(small, HUGE_SIDE, HUGE_SIDE)
    return out


# --------------------------------------------------------------- decode failures

def _corrupt_entropy_data(data: bytes) -> bytes:
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


def decode_failure_bytes(seed: int, k: int) -> tuple[str, bytes]:
    """(kind, bytes) of decode-failure file k: its own image, then broken."""
    rng = np.random.default_rng([seed, TAG_DECODE_FAILURE, k])
    img = synth(rng, 320, 240, (k * 0.37) % 1.0)
    valid = encode_jpeg(img, 90, SUB_420, False)
    kind = DECODE_FAILURE_KINDS[k % len(DECODE_FAILURE_KINDS)]
    if kind == 'truncated':
        return kind, valid[:len(valid) * 3 // 5]
    return kind, _corrupt_entropy_data(valid)


# ---------------------------------------------------------------- hostile shards

# What a server on the hostile shards sees: extra samples served, samples dropped at
# scan, damaged shards.
HOSTILE_INFO = {'served': 4, 'dropped_at_scan': 2, 'damaged_shards': 1}


def hostile_shards(good: Sequence[bytes]) -> list[Shard]:
    """The two shards of --hostile-shards, made of five valid images `good`.

    Shard 0: hostile_ok_0 (valid), hostile_notjpeg (a .jpg of random bytes),
    hostile_nolabel (an image without a label member), hostile_ok_1 (valid).
    Shard 1: hostile_trunc_0, hostile_trunc_1 (valid), hostile_trunc_2, whose image
    the file is cut in the middle of: a truncated tar."""
    rng = np.random.default_rng(np.random.SeedSequence([0, TAG_HAZARD, 7]))
    return [
        Shard([
            ShardSample('hostile_ok_0', good[0], 0),
            ShardSample('hostile_notjpeg', rng.integers(0, 256, 4096, dtype=np.uint8).tobytes(),
                        0),
            ShardSample('hostile_nolabel', good[1], None),
            ShardSample('hostile_ok_1', good[2], 1)], cut=None),
        Shard([
            ShardSample('hostile_trunc_0', good[3], 0),
            ShardSample('hostile_trunc_1', good[4], 1),
            ShardSample('hostile_trunc_2', good[0], 0)], cut='hostile_trunc_2'),
    ]
