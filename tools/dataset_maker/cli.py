"""The command line of tools/make_dataset.py (its docstring describes it)."""

import argparse
import os
import shutil
import sys
import tempfile
from typing import Any, Callable, Sequence

from dataset_maker.common import DatasetError
from dataset_maker.folder import FORMATS, POOL_THRESHOLD, make_dataset
from dataset_maker.shards import LABEL_FORMATS, make_shards

PROG = 'make_dataset.py'


def summary_line(s: dict[str, Any]) -> str:
    """make_dataset's summary in one line."""
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


def _int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer >= minimum."""
    def parse(text: str) -> int:
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


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description='Make an ImageNet-like folder of JPEG files '
                    '(OUT_DIR/<class>/<name>.JPEG) for tests, demos and benchmarks.')
    p.add_argument('out_dir', metavar='OUT_DIR',
                   help='folder to create (must not exist or be empty)')
    p.add_argument('--photos', metavar='DIR',
                   help='crop images from the photos in DIR (the project has some in '
                        '../shared/data/photos, from the repository root); '
                        'default: synthesise them')
    p.add_argument('--classes', metavar='N', type=_positive, default=10,
                   help='classes (default 10)')
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.photos is not None and not os.path.isdir(args.photos):
        parser.error('--photos: %s is not a directory' % args.photos)
    if args.tsv is not None and os.path.isdir(args.tsv):
        parser.error('--tsv: %s is a directory' % args.tsv)
    if args.shards is None and (args.from_folder or args.hostile_shards):
        parser.error('--from-folder and --hostile-shards need --shards N')
    if args.shards is not None:
        return _main_shards(args)
    s = _run(lambda: make_dataset(
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


def _run(fn: Callable[[], dict[str, Any]]) -> dict[str, Any] | int:
    """fn()'s result, or the exit status of its failure (after the message)."""
    try:
        return fn()
    except (DatasetError, ValueError, OSError) as e:
        print('%s: error: %s' % (PROG, e), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print('%s: interrupted' % PROG, file=sys.stderr)
        return 130


def _shards_from_args(args: argparse.Namespace) -> dict[str, Any]:
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


def _main_shards(args: argparse.Namespace) -> int:
    s = _run(lambda: _shards_from_args(args))
    if isinstance(s, int):
        return s
    if not args.quiet:
        print('%d samples in %d shards: %s' % (s['samples'], len(s['shards']), s['pattern']))
    return 0
