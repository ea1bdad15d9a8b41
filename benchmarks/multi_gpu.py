#!/usr/bin/env python3
"""Aggregate producer rate of one server with a ring per GPU, against one GPU.

    benchmarks/multi_gpu.py [--build DIR] [--data DIR] [--gpus 1,2,4] [--seconds S]
                            [--warmup S] [--json FILE]

For each GPU count g (default 1, 2 and 4 where that many are visible), in one
run: starts `batchcast-server serve DATA --device cuda:0,..,g-1 --decode gpu`
(train transform, 224, float16, NCHW, producer batch 256, window 8), one
batchcast.Loader per GPU (device=cuda:i, batch 256, in threads) reading as
fast as it can, waits --warmup seconds, then measures the samples every ring
published over --seconds. Prints img/s per GPU count, per ring, and the ratio
to one GPU (the goal: close to linear). Needs torch with CUDA, nvJPEG in the
build and a CUDA build of batchcast; the dataset (3,000 JPEGs by
tools/make_dataset.py, from ../shared/data/photos where it exists) is made
once under /tmp and read into the page cache. About 1-2 minutes in all.
"""
import argparse
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_files import make_dataset, warm_page_cache  # noqa: E402
from bench_server import ServerProcess, find_build, server_bin  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", help="the batchcast build (default: BATCHCAST_BUILD_DIR, build/)")
    p.add_argument("--data", default="/tmp/bc_multigpu_data")
    p.add_argument("--gpus", default=None,
                   help="GPU counts to run, e.g. 1,2,4 (default: 1, 2, 4 as visible)")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--warmup", type=float, default=5.0)
    p.add_argument("--json", default=None, help="also write the results here")
    args = p.parse_args()
    build = find_build(args.build)
    import batchcast
    import torch

    visible = torch.cuda.device_count()
    counts = ([int(x) for x in args.gpus.split(",")] if args.gpus
              else [g for g in (1, 2, 4) if g <= visible])
    counts = [g for g in counts if 1 <= g <= visible]
    if not counts:
        print(f"needs a GPU (visible: {visible})")
        return 1
    make_dataset(args.data, 3000, classes=100)
    warm_page_cache(args.data)
    binary = server_bin(build)
    results = []
    for g in counts:
        results.append(run_one(batchcast, binary, args, g))
        r = results[-1]
        print(f"{g} GPU(s): {r['rate']:.0f} img/s  per ring: "
              + ", ".join(f"{x:.0f}" for x in r["per_ring"]), flush=True)
    base = results[0]["rate"] if results[0]["gpus"] == 1 else None
    print("\ngpus  img/s     ratio to 1 GPU")
    for r in results:
        r["ratio"] = r["rate"] / base if base else None
        ratio = f"{r['ratio']:.2f}" if base else "-"
        print(f"{r['gpus']:>4}  {r['rate']:>8.0f}  {ratio}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "results": results}, f, indent=1)
    return 0


def published(batchcast, name, rings):
    stats = batchcast.query_stats(name, timeout=5.0)
    stats = json.loads(stats) if isinstance(stats, str) else stats
    if rings == 1:
        return [stats["samples_published"]]
    return [r["samples_published"] for r in stats["rings"]]


def run_one(batchcast, binary, args, g):
    name = f"mgbench-{os.getpid()}-{g}"
    options = {"device": "cuda:" + ",".join(str(i) for i in range(g)), "decode": "gpu",
               "batch_size": 256, "window": 8, "dtype": "float16", "layout": "nchw",
               "transform": "train", "size": 224}
    stop = threading.Event()
    errors = []

    def consume(i):
        try:
            loader = batchcast.Loader(name, batch_size=256, timeout=60, device=f"cuda:{i}")
            assert loader.ring_device == f"cuda:{i}", loader.ring_device
            while not stop.is_set():
                for _ in loader:
                    if stop.is_set():
                        break
            loader.close()
        except Exception as e:  # reported below
            errors.append(f"consumer on cuda:{i}: {e!r}")

    with ServerProcess(binary, name, options, data=args.data, timeout=120):
        threads = [threading.Thread(target=consume, args=(i,), daemon=True) for i in range(g)]
        try:
            for t in threads:
                t.start()
            time.sleep(args.warmup)
            t0, p0 = time.monotonic(), published(batchcast, name, g)
            time.sleep(args.seconds)
            t1, p1 = time.monotonic(), published(batchcast, name, g)
        finally:
            stop.set()
            for t in threads:
                t.join(30)
    if errors:
        raise RuntimeError("; ".join(errors))
    per_ring = [(b - a) / (t1 - t0) for a, b in zip(p0, p1)]
    return {"gpus": g, "rate": sum(per_ring), "per_ring": per_ring}


if __name__ == "__main__":
    sys.exit(main())
