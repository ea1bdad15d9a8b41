"""The ImageFolder layout: OUT_DIR/<class>/<class>_<i>.JPEG (plus hazard and
decode-failure files), and its .tsv list; the images rendered by worker processes."""

import multiprocessing
import os
import time
from os import PathLike
from typing import Any, Iterator

import numpy as np

from dataset_maker import formats as image_formats
from dataset_maker import hostile, images
from dataset_maker.common import class_name
from dataset_maker.images import SUB_420, SUB_422, SUB_444, RenderJob
from dataset_maker.placement import check_out_dir, written_aside

POOL_THRESHOLD = 100   # use worker processes from this many images on
FORMATS = ('jpeg', 'mixed')


def _run_jobs(jobs: list[RenderJob], workers: int) -> Iterator[tuple[int, int, int]]:
    """Run the jobs, in a fork Pool when asked and possible; yields results."""
    use_pool = (workers > 1 and len(jobs) > 1
                and 'fork' in multiprocessing.get_all_start_methods())
    if not use_pool:
        for job in jobs:
            yield images.render_one(job)
        return
    ctx = multiprocessing.get_context('fork')
    chunk = max(1, min(32, len(jobs) // (workers * 8)))
    pool = ctx.Pool(workers)
    try:
        for r in pool.imap_unordered(images.render_one, jobs, chunksize=chunk):
            yield r
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()


def _write(root: str, rel: str, data: bytes) -> None:
    with open(os.path.join(root, rel), 'wb') as f:
        f.write(data)


def make_dataset(out_dir: str | PathLike, photos: str | PathLike | None = None,
                 classes: int = 10, per_class: int = 20, seed: int = 0, hazards: bool = False,
                 tsv: str | PathLike | None = None, force: bool = False,
                 workers: int | None = None, decode_failures: int = 0,
                 formats: str = 'jpeg') -> dict[str, Any]:
    """Write the dataset; returns the summary as a dict.

    Keys: out_dir, classes, class_names, per_class, images, total_bytes, grayscale,
    progressive, sub_444, sub_422, sub_420, hazards (list of absolute paths),
    hazard_files (kind -> path), decode_failures (list of absolute paths, file k
    at k), formats (variant -> files: {'jpeg': images} unless formats='mixed'), tsv,
    workers, elapsed_s.
    formats: 'jpeg', or 'mixed' (formats.py: image k of the listing as variant k mod 15).
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
    photo_dir = os.fspath(photos) if photos else None
    photo_list = images.list_photos(photo_dir) if photo_dir else None
    check_out_dir(out_dir, force, photo_dir)

    n = classes * per_class
    if workers is None:
        workers = (os.cpu_count() or 1) if n >= POOL_THRESHOLD else 1
    if photo_list:                         # load before forking: workers share them
        for p in photo_list:
            images.load_photo(p)

    with written_aside(out_dir, force, photo_dir) as tmp:
        names = [class_name(c) for c in range(classes)]
        for nm in names:
            os.mkdir(os.path.join(tmp, nm))
        width = max(4, len(str(per_class - 1)))
        gray, prog, sub = images.plan(seed, n)
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
            rels, format_counts, delta = image_formats.mix_formats(tmp, [files[k] for k in keys])
            files = dict(zip(keys, rels))
            total += delta

        entries = [(c, rel) for (c, _i), rel in sorted(files.items())]
        hazard_files = {}
        if hazards:
            for kind, data in hostile.hazard_bytes(seed).items():
                rel = os.path.join(names[0], 'hazard_%s.JPEG' % kind)
                _write(tmp, rel, data)
                total += len(data)
                hazard_files[kind] = os.path.join(out_dir, rel)
                entries.append((0, rel))
        failure_files = []
        for k in range(decode_failures):
            kind, data = hostile.decode_failure_bytes(seed, k)
            c = k % classes
            rel = os.path.join(names[c], 'hazard_decode_%d_%s.JPEG' % (k, kind))
            _write(tmp, rel, data)
            total += len(data)
            failure_files.append(os.path.join(out_dir, rel))
            entries.append((c, rel))

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
        'hazards': [hazard_files[k] for k in hostile.HAZARD_NAMES if k in hazard_files],
        'hazard_files': hazard_files,
        'decode_failures': failure_files,
        'formats': format_counts,
        'tsv': tsv,
        'workers': workers,
        'elapsed_s': time.monotonic() - t0,
    }
