#!/usr/bin/env python3
"""Where a fed trainer loses its time without MPS (issue 9): ResNet-18 fed by a
GPU-decoding server, for several server settings, against the same trainer on
synthetic data in the same run.

  BATCHCAST_BUILD_DIR=BUILD python3 benchmarks/fed_trainer_sweep.py --out OUT \\
      [--configs 256:8,512:8,1024:4] [--workers 4]

Each config is SERVER_BATCH:WINDOW (`batchcast-server serve --batch-size
--window`, train 224 float16, device cache off, transcode cache on). The
dataset, trainer and server are benchmarks/gpu_producer.py's. Prints one line
per config: fed images/s and the ratio to synthetic.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_producer as gp  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--build")
    p.add_argument("--configs", default="256:8,512:8,1024:4")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--warmup", type=float, default=4)
    p.add_argument("--measure", type=float, default=10)
    a = p.parse_args(argv)
    # gpu_producer's defaults for everything else.
    args = gp_args(a)
    build = gp.find_build(a.build)
    os.makedirs(a.out, exist_ok=True)
    data = os.path.join("/tmp", f"bc_gpu_producer_{args.classes}x{args.per_class}")
    gp.make_dataset(args, data)
    gp.warm_page_cache(data)
    result = {"synthetic": gp.train_rate(args), "configs": []}
    for c in a.configs.split(","):
        batch, window = (int(x) for x in c.split(":"))
        args.server_batch, args.window = batch, window
        server = gp.ServerProc(build, data, f"sweep-{os.getpid()}-{batch}", args,
                               os.path.join(a.out, f"server_{batch}_{window}.log"))
        try:
            fed = gp.train_rate(args, server)
        finally:
            server.stop()
        result["configs"].append({"server_batch": batch, "window": window, "fed": fed})
        print(f"server batch {batch} window {window}: fed {fed:,.0f} img/s = "
              f"{fed / result['synthetic']:.2f} of synthetic {result['synthetic']:,.0f}", flush=True)
    with open(os.path.join(a.out, "fed_trainer_sweep.json"), "w") as f:
        json.dump(result, f, indent=1)
    return 0


def gp_args(a):
    return gp.parse_args(["--out", a.out, "--workers", str(a.workers), "--warmup", str(a.warmup),
                          "--measure", str(a.measure)])


if __name__ == "__main__":
    sys.exit(main())
