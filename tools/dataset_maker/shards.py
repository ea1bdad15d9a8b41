"""The WebDataset tar-shard layout: an ImageFolder tree packed into
OUT_DIR/train-000000.tar, ... (members KEY.jpg, or KEY.png, KEY.webp, ... for an
image of that format, and the label member, mtime 0 and
owner 0, so the tars are byte-identical for the same input), and the hostile shards
of hostile.py after them."""

import io
import os
import tarfile
from os import PathLike
from typing import Any, Sequence

from dataset_maker.common import DatasetError, Shard, ShardSample
from dataset_maker.formats import member_extension
from dataset_maker.hostile import HOSTILE_INFO, hostile_shards
from dataset_maker.placement import check_out_dir, written_aside

IMAGE_EXTS = ('.jpg', '.jpeg', '.png', '.ppm', '.bmp', '.pgm', '.tif', '.tiff', '.webp')
IMAGE_EXT_NAMES = tuple(e[1:] for e in IMAGE_EXTS)
LABEL_FORMATS = ('cls', 'json', 'txt')
SHARD_PREFIX = 'train-'


def _list_folder(folder: str) -> list[tuple[str, int]]:
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


def _label_member(key: str, label: int, label_format: str) -> tuple[str, bytes]:
    if label_format == 'json':
        return key + '.json', ('{"label": %d}' % label).encode()
    return key + '.' + label_format, ('%d\n' % label).encode()


def _write_shard(path: str, samples: Sequence[ShardSample], label_format: str) -> None:
    """One tar of the samples in order: KEY.jpg (KEY.png, ... for an image of that format,
    told from its bytes), then the label member if any."""
    with tarfile.open(path, 'w', format=tarfile.USTAR_FORMAT) as tar:
        for s in samples:
            members = [(s.key + '.' + member_extension(s.image), s.image)]
            if s.label is not None:
                members.append(_label_member(s.key, s.label, label_format))
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mtime = 0
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))


def _cut_in_image(path: str, key: str) -> None:
    """Truncates the tar at path in the middle of sample key's image data."""
    with tarfile.open(path) as t:
        member = next(m for m in t.getmembers()
                      if m.name.startswith(key + '.') and m.name[len(key) + 1:] in IMAGE_EXT_NAMES)
    with open(path, 'r+b') as f:
        f.truncate(member.offset_data + member.size // 2)


def make_shards(folder: str | PathLike, out_dir: str | PathLike, per_shard: int = 100,
                label_format: str = 'cls', hostile: bool = False,
                force: bool = False) -> dict[str, Any]:
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
    check_out_dir(out_dir, force, folder)
    names: list[str] = []
    with written_aside(out_dir, force, folder) as tmp:
        samples = []
        for k, (path, label) in enumerate(entries):
            with open(path, 'rb') as f:
                samples.append(ShardSample('%06d' % k, f.read(), label))
        shards = [Shard(samples[i:i + per_shard]) for i in range(0, len(samples), per_shard)]
        hostile_info = None
        if hostile:
            good = [open(entries[i % len(entries)][0], 'rb').read() for i in range(5)]
            shards += hostile_shards(good)
            hostile_info = dict(HOSTILE_INFO)
        for i, shard in enumerate(shards):
            names.append('%s%06d.tar' % (SHARD_PREFIX, i))
            path = os.path.join(tmp, names[-1])
            _write_shard(path, shard.samples, label_format)
            if shard.cut is not None:
                _cut_in_image(path, shard.cut)
    last = len(names) - 1
    return {
        'shards': [os.path.join(out_dir, n) for n in names],
        'pattern': os.path.join(out_dir, '%s{000000..%06d}.tar' % (SHARD_PREFIX, last)),
        'samples': len(entries),
        'per_shard': per_shard,
        'hostile': hostile_info,
    }
