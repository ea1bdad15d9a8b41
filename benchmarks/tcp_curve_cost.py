#!/usr/bin/env python3
"""The cost of tcp:// (every connection CURVE) against ipc://, in one run:
consumer throughput and Next() latency of one consumer against a synthetic
server process, over ipc:// (the reference) and tcp://127.0.0.1.

    /usr/bin/python3 benchmarks/tcp_curve_cost.py BUILD [BUILD...]
        [--seconds 5] [--rounds 3] [--size 4] [--batch-size 16]

Each BUILD's tools/batchcast-server serves, and a consumer imported from
BUILD/python (batchcast._core.Consumer.next(), no torch) reads batches as
fast as it can (several builds: compare a change). Only control messages
(HELLO, NEXT, BATCH, RELEASE, heartbeats) cross the socket; sample data is
in the shared-memory ring, so what CURVE adds is per message, and the
smallest samples and batches (the defaults) show it most. Rounds alternate
between builds and endpoints so that the machine's drift hits them alike.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

CONSUMER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from batchcast import _core
endpoint, batch = sys.argv[2], int(sys.argv[3])
seconds, prefetch = float(sys.argv[4]), int(sys.argv[5])
c = _core.Consumer(endpoint, batch, prefetch=prefetch, connect_timeout=20.0)
for _ in range(200):
    c.next()
lat = []
samples = batches = 0
start = time.perf_counter()
while time.perf_counter() - start < seconds:
    t0 = time.perf_counter()
    r = c.next()
    lat.append(time.perf_counter() - t0)
    if r is not None:
        batches += 1
        samples += len(r[1])
elapsed = time.perf_counter() - start
lat.sort()
print(json.dumps({"samples_per_s": samples / elapsed, "batches_per_s": batches / elapsed,
                  "p50_us": lat[len(lat) // 2] * 1e6, "p99_us": lat[int(len(lat) * 0.99)] * 1e6}))
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_once(build, transport, args, runtime):
    name = "curvebench-" + uuid.uuid4().hex[:8]
    endpoint = f"tcp://127.0.0.1:{free_port()}" if transport == "tcp" else name
    server = subprocess.Popen(
        [os.path.join(build, "tools", "batchcast-server"), "serve", "--synthetic", "1000000",
         "--size", str(args.size), "--batch-size", str(args.batch_size), "--window", "8",
         "--workers", "1", "--name", name, "--status-interval", "0", "--log-level", "warn"]
        + (["--endpoint", endpoint] if transport == "tcp" else []),
        env=dict(os.environ, XDG_RUNTIME_DIR=runtime))
    try:
        time.sleep(1.0)
        out = subprocess.run(
            [sys.executable, "-c", CONSUMER, os.path.join(build, "python"), endpoint,
             str(args.batch_size), str(args.seconds), str(args.prefetch)],
            env=dict(os.environ, XDG_RUNTIME_DIR=runtime), capture_output=True, text=True,
            timeout=args.seconds + 60)
        if out.returncode != 0:
            raise SystemExit(f"consumer failed ({build}, {transport}): {out.stderr}")
        return json.loads(out.stdout)
    finally:
        server.terminate()
        server.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("builds", nargs="+")
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--size", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--prefetch", type=int, default=2)
    args = p.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as runtime:
        os.chmod(runtime, 0o700)
        for _ in range(args.rounds):
            for build in args.builds:
                for transport in ("ipc", "tcp"):
                    r = run_once(os.path.abspath(build), transport, args, runtime)
                    results.setdefault((build, transport), []).append(r)
                    print(build, transport, json.dumps(r), flush=True)
    print(f"\nmedian of {args.rounds} rounds of {args.seconds} s; "
          f"uint8[3,{args.size},{args.size}], "
          f"batch {args.batch_size}, prefetch {args.prefetch}")
    print("| build | transport | batches/s | samples/s | Next() p50 | p99 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for (build, transport), rs in results.items():
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        print(f"| {build} | {transport} | {med['batches_per_s']:.0f} | "
              f"{med['samples_per_s']:.0f} | "
              f"{med['p50_us']:.1f} us | {med['p99_us']:.1f} us |")


if __name__ == "__main__":
    main()
