"""The output folder: whether it may be (re)placed, and writing it aside.

A dataset is written into a temporary sibling folder and renamed into place at the end,
so an interrupted run leaves no half-written output.
"""

import contextlib
import os
import shutil
import tempfile
from typing import Iterator

from dataset_maker.common import DatasetError


def check_out_dir(out_dir: str, force: bool, input_dir: str | None) -> None:
    """Raise DatasetError unless out_dir may be (re)placed.

    input_dir (the photos, or the folder packed into shards) must not lie inside it."""
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
    if input_dir:
        pr = os.path.realpath(input_dir)
        if pr == real or pr.startswith(real.rstrip(os.sep) + os.sep):
            raise DatasetError('refusing to replace %s: it contains the --photos folder'
                               % out_dir)


def _default_umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old


@contextlib.contextmanager
def written_aside(out_dir: str, force: bool, input_dir: str | None) -> Iterator[str]:
    """Yields a new temporary sibling of out_dir to write the dataset into.

    When the block ends, out_dir is checked again (someone may have written there
    meanwhile: check_out_dir), replaced and the sibling renamed to it; when the block
    fails, the sibling is removed."""
    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix='.%s.tmp-' % os.path.basename(out_dir), dir=parent)
    try:
        os.chmod(tmp, 0o777 & ~_default_umask())
        yield tmp
        check_out_dir(out_dir, force, input_dir)
        if os.path.isdir(out_dir):
            shutil.rmtree(out_dir)
        os.rename(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
