"""Helpers the Python benchmark programs share (benchmarks/*.py)."""
import os


def warm_page_cache(data):
    """Reads every file under `data` once, so that what is measured next finds
    them in the page cache (decode, not the disk); returns the bytes read."""
    n = 0
    for root, _dirs, files in os.walk(data):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                n += len(f.read())
    return n


def serve_flags(options):
    """batchcast.Server keywords as `batchcast-server serve` flags (a bool: --x / --no-x)."""
    flags = []
    for key, value in options.items():
        flag = key.replace("_", "-")
        if isinstance(value, bool):
            flags.append(("--" if value else "--no-") + flag)
        else:
            flags += ["--" + flag, str(value)]
    return flags
