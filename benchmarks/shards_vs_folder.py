#!/usr/bin/env python3
"""Serving tar shards vs a folder of the same images (CPU path).

Makes an ImageNet-like folder (tools/make_dataset.py) and packs it into WebDataset
shards (make_shards), warms the page cache with both (reads every file), then, in
one run, alternates: an in-process batchcast.Server on the folder, then on the
shards, with the same options and workers; one Loader reads E epochs after a
warm-up epoch; prints samples/s of each round and the medians.

    BATCHCAST_BUILD_DIR=BUILD python3 benchmarks/shards_vs_folder.py \\
        [--images 2000] [--per-shard 200] [--workers 2] [--size 224] [--rounds 3] [--epochs 2]
        [--shuffle-buffer 1000] [--photos DIR]
"""
import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_server import find_build  # noqa: E402

find_build()
import batchcast  # noqa: E402

TOOL = os.path.join(HERE, "..", "tools", "make_dataset.py")


def tool():
    spec = importlib.util.spec_from_file_location("make_dataset", TOOL)
    md = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(md)
    return md


def warm(paths):
    n = 0
    for p in paths:
        with open(p, "rb") as f:
            n += len(f.read())
    return n


def run(data, args, name):
    with batchcast.Server(data, name=name, size=args.size, batch_size=64, window=8,
                          workers=args.workers, epochs=args.epochs + 1, dtype="uint8",
                          shuffle_buffer=args.shuffle_buffer) as srv:
        loader = batchcast.Loader(srv.endpoint, batch_size=64, drop_last=False, join="next_epoch")
        for _ in loader:  # warm-up epoch
            pass
        t0, n = time.monotonic(), 0
        for _ in range(args.epochs):
            for images, _labels in loader:
                n += images.shape[0]
        dt = time.monotonic() - t0
        loader.close()
    return n / dt


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--images", type=int, default=2000)
    p.add_argument("--per-shard", type=int, default=200)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--shuffle-buffer", type=int, default=1000)
    p.add_argument("--photos", help="crop the images from these photos (make_dataset.py --photos)")
    args = p.parse_args()
    md = tool()
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "folder")
        md.make_dataset(folder, classes=10, per_class=args.images // 10, seed=1, photos=args.photos)
        shards = md.make_shards(folder, os.path.join(tmp, "shards"), per_shard=args.per_shard)
        files = [os.path.join(r, f) for r, _d, fs in os.walk(folder) for f in fs]
        size = warm(files) + warm(shards["shards"])
        print(f"{len(files)} images, {len(shards['shards'])} shards, {size / 2**20:.0f} MiB "
              f"read once to warm the page cache; workers {args.workers}, size {args.size}, "
              f"uint8, batch 64, shuffle_buffer {args.shuffle_buffer}")
        rates = {"folder": [], "shards": []}
        for r in range(args.rounds):
            for kind, data in (("folder", folder), ("shards", shards["pattern"])):
                rate = run(data, args, f"bench-{kind}-{os.getpid()}-{r}")
                rates[kind].append(rate)
                print(f"round {r} {kind:6s} {rate:8.0f} samples/s", flush=True)
        for kind, v in rates.items():
            print(f"median {kind:6s} {statistics.median(v):8.0f} samples/s")


if __name__ == "__main__":
    main()
