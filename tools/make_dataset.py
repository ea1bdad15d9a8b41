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
(dataset_maker/formats.py): image k (in listing order) becomes variant k mod 15 of
jpeg, png, png16, png-palette, png-gray, png-gray16, png-rgba, png-la, webp,
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
Only the standard library, numpy and Pillow are needed. The code is in the package
dataset_maker beside this file (one module per concept: images, other formats,
hostile files, folder and shard layouts, the command line).
"""

import os
import sys

# The package beside this file, also when this file is loaded by path (importlib).
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from dataset_maker.cli import main, summary_line  # noqa: E402
from dataset_maker.common import DatasetError  # noqa: E402
from dataset_maker.folder import make_dataset  # noqa: E402
from dataset_maker.shards import make_shards  # noqa: E402

__all__ = ['DatasetError', 'main', 'make_dataset', 'make_shards', 'summary_line']

if __name__ == '__main__':
    sys.exit(main())
