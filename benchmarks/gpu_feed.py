#!/usr/bin/env python3
"""The GPU server feeding a Loader, against nvJPEG decode-only in the same run.

  python3 benchmarks/gpu_feed.py --out OUT [--data DIR] [--images 10000] [--repeat 3]
      [--seconds 10] [--warmup 3] [--batch-size 256]
  python3 benchmarks/gpu_feed.py --smoke --out /tmp/gf      # CPU, seconds: the plumbing

1. The dataset: --data, or about --images JPEGs (~500x375) made by
   tools/make_dataset.py from ../shared/data/photos where it exists (about
   5 % progressive files, which the hardware decoder refuses); read once, so
   that the page cache holds it: what is measured is decoding, not the disk.
2. One server process as the README's recipe starts it: `batchcast-server
   serve DATA --device cuda:0 --batch-size B --dtype bfloat16`, every other
   option its default (GPU decode where built, train 224, device cache off,
   transcode cache on: the progressive files are re-encoded as baseline
   once, in the warm-up epoch, then decoded by the hardware engine; the
   summary gives the server's own description of its caches). One epoch is
   read through it before anything is measured.
3. --repeat rounds, each of:
   a. the reference: nvJPEG's batched decode of the files it takes, alone
      (benchmarks/gpu_pipeline_bench --modes decode: batches of B, the files
      in page-locked memory as the server passes them, no I/O, no augment);
      the server is idle meanwhile (no consumer attached: it pauses);
   b. one `batchcast.Loader(name, batch_size=B)` reading as fast as it can:
      after --warmup seconds, its images/s over --seconds, and the server
      process's CPU cores (/proc) over the same window;
   and their ratio, fed / decode-only (the two measured back to back).
Prints each round and the medians with their ranges; writes OUT/gpu_feed.json.

--smoke (no GPU needed): a tiny dataset served on the CPU (32 px), two
rounds of short windows and no reference (decode-only needs a GPU).

The build is BATCHCAST_BUILD_DIR (or --build, else build/).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_files import default_dataset, make_dataset, warm_page_cache  # noqa: E402
from bench_proc import cpu_seconds  # noqa: E402
from bench_server import ServerProcess, find_build, server_bin  # noqa: E402


def decode_only(build: str, data: str, args: argparse.Namespace) -> Dict[str, Any]:
    """gpu_pipeline_bench's decode-only result (its last JSON line)."""
    cmd = [os.path.join(build, "benchmarks", "gpu_pipeline_bench"), data, "--modes", "decode",
           "--batch", str(args.batch_size), "--seconds", str(args.seconds)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120 + 2 * args.seconds)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(cmd)} failed: {out.stderr[-2000:]}")
    return json.loads(lines[-1])


def feed(server: ServerProcess, args: argparse.Namespace) -> Dict[str, float]:
    """One Loader reading as fast as it can: its images/s and the server's cores."""
    import batchcast
    import torch

    loader = batchcast.Loader(server.name, batch_size=args.batch_size)

    def batches():
        while True:
            for images, _labels in loader:
                n = images.shape[0]
                del images  # the lease ends with the batch's last tensor
                yield n

    it = batches()
    t_end = time.monotonic() + args.warmup
    while time.monotonic() < t_end:
        next(it)
    cpu0, t0, n = cpu_seconds(server.pid) or 0.0, time.monotonic(), 0
    while time.monotonic() < t0 + args.seconds:
        n += next(it)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    wall = time.monotonic() - t0
    cores = ((cpu_seconds(server.pid) or 0.0) - cpu0) / wall
    it.close()
    loader.close()
    return {"images_per_s": n / wall, "server_cores": cores}


def spread(values: List[float], spec: str) -> str:
    """"median (min-max)" of `values` (just the value for one)."""
    text = format(statistics.median(values), spec)
    if len(values) > 1:
        text += f" ({format(min(values), spec)}-{format(max(values), spec)})"
    return text


def summary(r: Dict[str, Any]) -> str:
    rounds = r["rounds"]
    fed = [x["fed"]["images_per_s"] for x in rounds]
    lines = [f"{r['device']}; {r['files']} files, {r['bytes'] / 2**20:.0f} MiB in the page cache",
             f"server: {r['server_command']}",
             f"  its source: {r['server_source']}",
             f"  MPS: {r['mps']}; {r['rounds_note']}",
             f"server -> one Loader (batch {r['args']['batch_size']}): {spread(fed, ',.0f')} "
             f"img/s, server {spread([x['fed']['server_cores'] for x in rounds], '.2f')} cores"]
    if rounds and "decode_only" in rounds[0]:
        ref = [x["decode_only"]["images_per_s"] for x in rounds]
        d = rounds[0]["decode_only"]
        lines += [f"nvJPEG decode-only ({d['backend']}, {d['files']} files it takes, "
                  f"{d['files_not_supported']} not): {spread(ref, ',.0f')} img/s",
                  f"fed / decode-only: {spread([x['ratio'] for x in rounds], '.2f')}"]
    else:
        lines.append("nvJPEG decode-only: not measured (no GPU)")
    return "\n".join(lines)


def parse_args(argv: List[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--data", help="an ImageFolder (default: made as /tmp/batchcast-bench-IMAGES)")
    p.add_argument("--images", type=int, default=10000, help="images of the made dataset")
    p.add_argument("--photos", help="make_dataset.py --photos DIR")
    p.add_argument("--build", help="the batchcast build (default: BATCHCAST_BUILD_DIR, build/)")
    p.add_argument("--batch-size", type=int, default=256,
                   help="the server's batch, the Loader's and decode-only's")
    p.add_argument("--repeat", type=int, default=3, help="rounds of decode-only then fed")
    p.add_argument("--warmup", type=float, default=3.0, help="seconds of reading before a window")
    p.add_argument("--seconds", type=float, default=10.0, help="seconds of a measured window")
    p.add_argument("--smoke", action="store_true", help="CPU, tiny, seconds; no reference")
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    if args.smoke:
        args.images, args.batch_size, args.repeat = 24, 8, 2
        args.warmup, args.seconds = 0.3, 1.0
    return args


def main(argv: List[str]) -> int:
    args = parse_args(argv)
    build = find_build(args.build)
    if build is None:
        sys.exit("no batchcast build found: set BATCHCAST_BUILD_DIR or --build")
    data = args.data or default_dataset(args.images)
    files = make_dataset(data, args.images, photos=args.photos)
    size = warm_page_cache(data)
    options: Dict[str, Any] = {"device": "cpu" if args.smoke else "cuda:0",
                               "batch_size": args.batch_size, "dtype": "bfloat16"}
    if args.smoke:
        options.update(size=32, workers=1)
    os.makedirs(args.out, exist_ok=True)
    result: Dict[str, Any] = {"args": vars(args), "data": data, "files": files, "bytes": size,
                              "rounds": [], "rounds_note": f"{args.repeat} round(s) of "
                              f"{args.warmup:g} s warm-up + {args.seconds:g} s"}
    if args.smoke:
        result["device"] = "cpu (smoke run)"
    else:
        import torch

        result["device"] = torch.cuda.get_device_name(0)
    name = f"gpu-feed-{os.getpid()}"
    with open(os.path.join(args.out, "server.log"), "w") as log, \
            ServerProcess(server_bin(build), name, options, data=data, log=log,
                          log_level="info") as server:
        result["server_command"] = " ".join(server.cmd)
        import batchcast

        with batchcast.Loader(name, batch_size=args.batch_size) as warm:
            for _ in warm:  # one epoch: the transcode cache filled, everything started
                pass
        for k in range(args.repeat):
            got: Dict[str, Any] = {}
            if not args.smoke:
                got["decode_only"] = decode_only(build, data, args)
            got["fed"] = feed(server, args)
            if "decode_only" in got:
                got["ratio"] = got["fed"]["images_per_s"] / got["decode_only"]["images_per_s"]
            result["rounds"].append(got)
            print(f"round {k}: " + json.dumps(got), flush=True)
        stats = server.stats()
        result.update(server_source=stats.get("source"), mps=stats.get("mps"),
                      source_counters=stats.get("source_counters"))
    with open(os.path.join(args.out, "gpu_feed.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(summary(result))
    print(f"({os.path.join(args.out, 'gpu_feed.json')})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
