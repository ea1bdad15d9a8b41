"""Tests of tools/make_dataset.py (the ImageNet-like JPEG folder generator).

Run: /usr/bin/python3 -m pytest tests/python/test_make_dataset.py -q
Needs numpy and Pillow only; counts are kept small so the file runs in seconds.
The photo tests use ../shared/data/photos (from the repository root) or
$BATCHCAST_PHOTOS.
"""

import importlib.util
import io
import os
import subprocess
import sys
import tarfile

import pytest
from PIL import Image, JpegImagePlugin, UnidentifiedImageError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(REPO, 'tools', 'make_dataset.py')
# The project's photos: ../shared/data/photos next to the repository (every
# checkout of the project has it there); $BATCHCAST_PHOTOS names another folder.
PHOTOS = os.environ.get('BATCHCAST_PHOTOS') or os.path.join(os.path.dirname(REPO), 'shared',
                                                            'data', 'photos')
NO_PHOTOS = 'no photo folder at %s (set BATCHCAST_PHOTOS)' % PHOTOS
HAZARDS = ('truncated', 'empty', 'png', 'cmyk', 'random', 'huge')


@pytest.fixture(scope='module')
def md():
    spec = importlib.util.spec_from_file_location('make_dataset_under_test', TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)   # deliberately not registered in sys.modules
    return mod


@pytest.fixture(scope='module')
def ds(md, tmp_path_factory):
    """3 classes x 20 images with hazards and a TSV, made once for several tests."""
    base = tmp_path_factory.mktemp('ds')
    out, tsv = base / 'data', base / 'list.tsv'
    summary = md.make_dataset(out, classes=3, per_class=20, seed=7, hazards=True, tsv=tsv)
    return out, tsv, summary


def regular_files(root):
    """relative path -> bytes of every non-hazard file under root."""
    out = {}
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            if not n.startswith('hazard_'):
                p = os.path.join(dirpath, n)
                with open(p, 'rb') as f:
                    out[os.path.relpath(p, root)] = f.read()
    return out


def run_cli(*args):
    return subprocess.run([sys.executable, TOOL, *map(str, args)],
                          capture_output=True, text=True, timeout=60)


# ---------------------------------------------------------------- structure

def test_structure_and_class_names(ds):
    out, _tsv, s = ds
    classes = sorted(os.listdir(out))
    assert classes == ['n00000000', 'n00000001', 'n00000002']
    assert s['class_names'] == classes
    for c, name in enumerate(classes):
        files = sorted(f for f in os.listdir(out / name) if not f.startswith('hazard_'))
        assert len(files) == 20
        assert all(f.startswith(name + '_') and f.endswith('.JPEG') for f in files)
    assert s['images'] == 60 and s['classes'] == 3
    total = sum(os.path.getsize(os.path.join(d, f))
                for d, _, fs in os.walk(out) for f in fs)
    assert s['total_bytes'] == total
    # No leftover temporary folder next to the output.
    assert sorted(os.listdir(out.parent)) == ['data', 'list.tsv']


def test_every_regular_file_decodes_with_sane_size(ds):
    out, _tsv, _s = ds
    files = regular_files(out)
    assert len(files) == 60
    sizes = []
    for rel, data in files.items():
        im = Image.open(io.BytesIO(data))
        assert im.format == 'JPEG', rel
        im.load()                                   # full decode
        w, h = im.size
        assert 300 <= w <= 640 and 300 <= h <= 640, (rel, im.size)
        assert im.mode in ('RGB', 'L'), rel
        sizes.append(len(data))
    # Realistic JPEG sizes (not flat colours): tens of KB on average.
    assert 10_000 < sum(sizes) / len(sizes) < 200_000
    assert min(sizes) > 3_000


def test_encoding_variety_matches_summary(ds):
    out, _tsv, s = ds
    gray = prog = 0
    sampling = {0: 0, 1: 0, 2: 0}
    qtables, shapes = set(), set()
    for rel, data in regular_files(out).items():
        im = Image.open(io.BytesIO(data))
        shapes.add((im.size[0] > im.size[1], im.size))
        if im.info.get('progressive') or im.info.get('progression'):
            prog += 1
        if im.mode == 'L':
            gray += 1
            assert JpegImagePlugin.get_sampling(im) == -1
        else:
            sampling[JpegImagePlugin.get_sampling(im)] += 1
        qtables.add(tuple(im.quantization[0]))
    assert gray == s['grayscale'] >= 1
    assert prog == s['progressive'] >= 1
    assert sampling[0] == s['sub_444'] >= 1
    assert sampling[1] == s['sub_422'] >= 1
    assert sampling[2] == s['sub_420']
    assert sampling[2] > sampling[0] + sampling[1]     # 4:2:0 dominates
    assert len(qtables) >= 5                           # several qualities in use
    assert any(land for land, _ in shapes)             # landscape images
    assert any(not land for land, _ in shapes)         # and portrait/square ones
    assert len({size for _, size in shapes}) >= 5      # varied sizes


# ------------------------------------------------------------- determinism

def test_deterministic_same_seed_and_worker_count(md, tmp_path):
    a = md.make_dataset(tmp_path / 'a', classes=2, per_class=6, seed=3, workers=1)
    b = md.make_dataset(tmp_path / 'b', classes=2, per_class=6, seed=3, workers=2)
    assert a['workers'] == 1 and b['workers'] == 2
    fa, fb = regular_files(tmp_path / 'a'), regular_files(tmp_path / 'b')
    assert len(fa) == 12 and fa == fb                  # byte-identical, serial vs pool
    md.make_dataset(tmp_path / 'c', classes=2, per_class=6, seed=4)
    fc = regular_files(tmp_path / 'c')
    assert fa.keys() == fc.keys()
    assert all(fa[k] != fc[k] for k in fa)             # another seed: other images


def test_hazards_deterministic(md, tmp_path):
    a = md.make_dataset(tmp_path / 'a', classes=1, per_class=1, seed=5, hazards=True)
    b = md.make_dataset(tmp_path / 'b', classes=1, per_class=1, seed=5, hazards=True)
    for pa, pb in zip(a['hazards'], b['hazards']):
        with open(pa, 'rb') as fa, open(pb, 'rb') as fb:
            assert fa.read() == fb.read()


# ----------------------------------------------------------------- hazards

def test_hazard_files(ds, monkeypatch):
    out, _tsv, s = ds
    first = out / 'n00000000'
    paths = {k: str(first / ('hazard_%s.JPEG' % k)) for k in HAZARDS}
    assert s['hazards'] == [paths[k] for k in HAZARDS]
    assert s['hazard_files'] == paths
    for p in paths.values():
        assert os.path.isfile(p)
    for other in ('n00000001', 'n00000002'):
        assert not any(f.startswith('hazard_') for f in os.listdir(out / other))

    assert os.path.getsize(paths['empty']) == 0

    with open(paths['png'], 'rb') as f:
        assert f.read(8) == b'\x89PNG\r\n\x1a\n'

    with Image.open(paths['cmyk']) as im:            # a VALID image
        assert im.format == 'JPEG' and im.mode == 'CMYK'
        assert 'adobe' in im.info                      # Adobe APP14 marker present
        im.load()
        rgb = im.convert('RGB')
        assert rgb.size == im.size and rgb.getextrema() != ((0, 0), (0, 0), (0, 0))

    with open(paths['random'], 'rb') as f:
        data = f.read()
    assert 8_000 <= len(data) <= 12_000 and data[:2] != b'\xff\xd8'
    with pytest.raises(UnidentifiedImageError):
        Image.open(paths['random'])

    with open(paths['truncated'], 'rb') as f:
        data = f.read()
    assert data[:2] == b'\xff\xd8' and len(data) > 1000 and not data.endswith(b'\xff\xd9')
    with pytest.raises(OSError):
        with Image.open(paths['truncated']) as im:
            im.load()

    # The huge one declares 60000x60000 in its frame header; read the header only
    # (PIL would otherwise refuse it as a decompression bomb at open time).
    monkeypatch.setattr(Image, 'MAX_IMAGE_PIXELS', None)
    with Image.open(paths['huge']) as im:
        assert im.format == 'JPEG'
        assert im.size == (60000, 60000)
    assert os.path.getsize(paths['huge']) < 20_000


def test_decode_failures(md, tmp_path):
    """--decode-failures K: K files with a valid header (PIL reads their size) and
    broken data, file k in class k mod N, alternately truncated and corrupt; the
    regular files are the same as without them; deterministic."""
    s = md.make_dataset(tmp_path / 'a', classes=2, per_class=3, seed=6, decode_failures=3)
    plain = md.make_dataset(tmp_path / 'p', classes=2, per_class=3, seed=6)
    again = md.make_dataset(tmp_path / 'b', classes=2, per_class=3, seed=6, decode_failures=3)
    assert regular_files(tmp_path / 'a') == regular_files(tmp_path / 'p')
    assert plain['decode_failures'] == [] and s['hazards'] == []
    want = [tmp_path / 'a' / 'n00000000' / 'hazard_decode_0_truncated.JPEG',
            tmp_path / 'a' / 'n00000001' / 'hazard_decode_1_corrupt.JPEG',
            tmp_path / 'a' / 'n00000000' / 'hazard_decode_2_truncated.JPEG']
    assert s['decode_failures'] == [str(p) for p in want]
    contents = []
    for path, other in zip(s['decode_failures'], again['decode_failures']):
        with open(path, 'rb') as f, open(other, 'rb') as g:
            data = f.read()
            assert data == g.read()
        contents.append(data)
        with Image.open(path) as im:  # the header is valid
            assert im.format == 'JPEG' and im.size == (320, 240)
        assert data.endswith(b'\xff\xd9') == path.endswith('_corrupt.JPEG')
    assert len(set(contents)) == 3  # each its own image
    # The corrupt one: a restart marker where no restart interval was declared.
    corrupt = contents[1]
    sos = corrupt.index(b'\xff\xda')
    start = sos + 2 + int.from_bytes(corrupt[sos + 2:sos + 4], 'big')
    assert corrupt[start + 16:start + 18] == b'\xff\xd3' and b'\xff\xdd' not in corrupt[:sos]
    r = run_cli(tmp_path / 'c', '--classes', 1, '--per-class', 1, '--decode-failures', 2)
    assert r.returncode == 0, r.stderr
    assert 'files that fail to decode:' in r.stdout and 'decode failures 2' in r.stdout
    assert run_cli(tmp_path / 'd', '--decode-failures', -1).returncode == 2


def test_patch_sof_size_rejects_non_jpeg(md):
    from dataset_maker.hostile import patch_sof_size   # importable once md is loaded
    with pytest.raises(ValueError):
        patch_sof_size(b'\x89PNG\r\n\x1a\n' + b'\0' * 32, 10, 10)


def test_tsv_lists_every_file(ds):
    out, tsv, s = ds
    lines = tsv.read_text().splitlines()
    assert len(lines) == 60 + len(HAZARDS)
    listed = set()
    for line in lines:
        path, label = line.split('\t')
        assert os.path.isabs(path) and os.path.isfile(path)
        cls = os.path.basename(os.path.dirname(path))
        assert int(label) == s['class_names'].index(cls)
        listed.add(path)
    on_disk = {os.path.join(d, f) for d, _, fs in os.walk(out) for f in fs}
    assert listed == on_disk


# ------------------------------------------------------------------ photos

@pytest.mark.skipif(not os.path.isdir(PHOTOS), reason=NO_PHOTOS)
def test_photos_mode(md, tmp_path):
    s = md.make_dataset(tmp_path / 'p', photos=PHOTOS, classes=2, per_class=12, seed=1)
    files = regular_files(tmp_path / 'p')
    assert len(files) == 24 == s['images']
    assert s['grayscale'] >= 1
    for rel, data in files.items():
        im = Image.open(io.BytesIO(data))
        im.load()
        assert 300 <= im.size[0] <= 640 and 300 <= im.size[1] <= 640
    # Crops of real photos differ from the synthetic images for the same seed.
    md.make_dataset(tmp_path / 's', classes=2, per_class=12, seed=1)
    synth = regular_files(tmp_path / 's')
    assert all(synth[k] != files[k] for k in files)


@pytest.mark.skipif(not os.path.isdir(PHOTOS), reason=NO_PHOTOS)
def test_cli_photos(tmp_path):
    r = run_cli(tmp_path / 'p', '--photos', PHOTOS, '--classes', 2, '--per-class', 2)
    assert r.returncode == 0, r.stderr
    assert '4 images, 2 classes' in r.stdout
    assert len(regular_files(tmp_path / 'p')) == 4


# --------------------------------------------------------------------- CLI

@pytest.mark.parametrize('args', [
    ['--bogus'],
    ['--classes', '0'],
    ['--classes', 'ten'],
    ['--per-class', '-3'],
    ['--seed', '-1'],
    ['--photos', '/nonexistent/photos'],
    [],                                                # OUT_DIR missing
])
def test_cli_bad_option_exit_2(tmp_path, args):
    target = [] if not args else [tmp_path / 'o']
    r = run_cli(*target, *args)
    assert r.returncode == 2
    assert 'Traceback' not in r.stderr and 'error' in r.stderr
    assert not (tmp_path / 'o').exists()


def test_cli_refuses_non_empty_out_dir_then_force(tmp_path):
    out = tmp_path / 'o'
    out.mkdir()
    (out / 'keep.txt').write_text('precious')
    r = run_cli(out, '--classes', 1, '--per-class', 2)
    assert r.returncode != 0
    assert 'not empty' in r.stderr and 'Traceback' not in r.stderr
    assert os.listdir(out) == ['keep.txt']
    assert [n for n in os.listdir(tmp_path) if n != 'o'] == []   # temp folder cleaned

    r = run_cli(out, '--classes', 1, '--per-class', 2, '--force', '--quiet')
    assert r.returncode == 0, r.stderr
    assert r.stdout == ''
    assert os.listdir(out) == ['n00000000']


def test_cli_empty_out_dir_is_fine_and_prints_summary(tmp_path):
    out = tmp_path / 'o'
    out.mkdir()
    r = run_cli(out, '--classes', 2, '--per-class', 2, '--hazards',
                '--tsv', tmp_path / 'l.tsv')
    assert r.returncode == 0, r.stderr
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith('4 images, 2 classes,') and 'hazards 6' in last
    for k in HAZARDS:
        assert 'hazard_%s.JPEG' % k in r.stdout
    assert len((tmp_path / 'l.tsv').read_text().splitlines()) == 10


def test_function_errors(md, tmp_path):
    out = tmp_path / 'o'
    out.mkdir()
    (out / 'x').write_text('x')
    with pytest.raises(md.DatasetError):
        md.make_dataset(out, classes=1, per_class=1)
    with pytest.raises(ValueError):
        md.make_dataset(tmp_path / 'n', classes=0)
    with pytest.raises(md.DatasetError):
        md.make_dataset(tmp_path / 'n', photos=tmp_path / 'missing', classes=1, per_class=1)
    assert not (tmp_path / 'n').exists()


# ----------------------------------------------------------------- formats

def test_mixed_formats(md, tmp_path):
    """--formats mixed: image k of the listing is variant k mod 15, deterministic, in the TSV
    and in the shards (members named by the bytes' format)."""
    s = md.make_dataset(tmp_path / 'a', classes=2, per_class=16, seed=3, formats='mixed',
                        tsv=tmp_path / 'a.tsv')
    md.make_dataset(tmp_path / 'b', classes=2, per_class=16, seed=3, formats='mixed')
    assert regular_files(tmp_path / 'a') == regular_files(tmp_path / 'b')
    names = sorted(regular_files(tmp_path / 'a'))
    assert len(names) == 32 and sum(s['formats'].values()) == 32
    assert s['formats']['png-as-jpeg'] == 2 and s['formats']['jpeg'] == 3
    want = {'jpeg': ('JPEG', 'RGB'), 'png': ('PNG', 'RGB'), 'png16': ('PNG', 'RGB'),
            'png-palette': ('PNG', 'P'), 'png-gray': ('PNG', 'L'), 'png-gray16': ('PNG', 'I'),
            'png-rgba': ('PNG', 'RGBA'), 'png-la': ('PNG', 'LA'), 'webp': ('WEBP', 'RGB'),
            'webp-rgba': ('WEBP', 'RGBA'), 'bmp': ('BMP', 'RGB'), 'tiff': ('TIFF', 'RGB'),
            'tiff-gray': ('TIFF', 'L'), 'ppm': ('PPM', 'RGB'), 'png-as-jpeg': ('PNG', 'RGB')}
    variants = list(want)
    for k, rel in enumerate(names):
        variant = variants[k % len(variants)]
        with Image.open(tmp_path / 'a' / rel) as img:
            fmt, mode = want[variant]
            assert img.format == fmt, (rel, variant)
            assert img.mode.startswith(mode) or (mode, img.mode) == ('L', 'L'), (rel, img.mode)
            if variant in ('jpeg', 'png-as-jpeg'):
                assert rel.endswith('.JPEG')
            if variant == 'png16':
                with open(tmp_path / 'a' / rel, 'rb') as f:
                    assert f.read(26)[24] == 16   # IHDR bit depth
    with open(tmp_path / 'a.tsv') as f:
        listed = sorted(os.path.relpath(line.split('\t')[0], tmp_path / 'a') for line in f)
    assert listed == names
    sh = md.make_shards(tmp_path / 'a', tmp_path / 'shards', per_shard=40)
    with tarfile.open(sh['shards'][0]) as t:
        members = [m.name for m in t.getmembers() if not m.name.endswith('.cls')]
    assert [m.split('.')[1] for m in members[:15]] == [
        'jpg', 'png', 'png', 'png', 'png', 'png', 'png', 'png', 'webp', 'webp', 'bmp', 'tiff',
        'tiff', 'ppm', 'png']
    r = run_cli(tmp_path / 'c', '--classes', 1, '--per-class', 2, '--formats', 'gif')
    assert r.returncode == 2 and '--formats' in r.stderr
