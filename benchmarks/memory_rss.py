#!/usr/bin/env python3
"""Resident memory of the server and its consumers, with 1 and 8 consumers.

  /usr/bin/python3 benchmarks/memory_rss.py [--consumers 1 8] [--size 64]

Runs `batchcast-server serve --synthetic ... --window 8 --batch-size 64` and N
example consumers (batch 48, so most batches are gathered into a private
buffer: the worst case for consumer memory) reading as fast as they can, then
reads VmRSS, RssAnon and RssShmem from /proc/PID/status. The shared ring is
counted in RssShmem of every process that touched it, once in the machine.
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_server import ServerProcess, find_build, server_bin  # noqa: E402

BUILD = find_build()


def status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssShmem"):
                out[key] = int(value.split()[0]) / 1024.0  # MiB
    return out


def run(n, size):
    name = f"bench-mem-{os.getpid()}-{n}"
    server = ServerProcess(server_bin(BUILD), name, {"synthetic": 1000000, "size": size,
                                                     "batch_size": 64, "window": 8, "workers": 1})
    consumers = [subprocess.Popen([os.path.join(BUILD, "examples", "consumer"), name,
                                   "--batch-size", "48", "--epochs", "1000"],
                                  stdout=subprocess.DEVNULL) for _ in range(n)]
    time.sleep(3)
    s = status(server.pid)
    cs = [status(c.pid) for c in consumers]
    for c in consumers:
        c.kill()
    server.stop()
    ring_mib = 8 * 64 * (3 * size * size + 8) / 2**20
    avg = {k: sum(c[k] for c in cs) / len(cs) for k in cs[0]}
    print(f"{n} consumer(s): ring {ring_mib:.1f} MiB | server RSS {s['VmRSS']:.1f} MiB "
          f"(anon {s['RssAnon']:.1f}, shm {s['RssShmem']:.1f}) | per consumer RSS "
          f"{avg['VmRSS']:.1f} MiB (anon {avg['RssAnon']:.1f}, shm {avg['RssShmem']:.1f})",
          flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--consumers", type=int, nargs="+", default=[1, 8])
    p.add_argument("--size", type=int, default=64)
    args = p.parse_args()
    for n in args.consumers:
        run(n, args.size)


if __name__ == "__main__":
    main()
