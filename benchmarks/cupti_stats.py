#!/usr/bin/env python3
"""Summarizes a trace of benchmarks/cupti_trace.cc, one line per time bin.

  python3 benchmarks/cupti_stats.py TRACE [--bin 1.0] [--top 3]

Per bin: the GPU time the process's kernels and copies covered (their
union), its copies (count, time, bytes), its kernels with the most GPU time
(count, mean duration, mean wait from submission to start) and the CUDA API
calls that held its threads longest (count, total time, mean per call).
A bin where one API call is made about once per image, and its mean is far
above the work it waits for, is a round trip per image (issue 9).
"""
import argparse
import collections
import sys


def read(path):
    """The trace's records as (kind, start, end, fields)."""
    records = []
    with open(path, errors="replace") as f:
        for line in f:
            fields = line.rstrip("\n").split(" ")
            if len(fields) < 4 or fields[0] not in ("K", "M", "S", "R", "D"):
                continue
            try:
                start, end = int(fields[1]), int(fields[2])
            except ValueError:
                continue
            if start > 0 and end >= start:
                records.append((fields[0], start, end, fields))
    return records


def covered(spans):
    """Nanoseconds covered by the union of (start, end) spans."""
    total, cur = 0, None
    for s, e in sorted(spans):
        if cur is None or s > cur[1]:
            if cur is not None:
                total += cur[1] - cur[0]
            cur = [s, e]
        else:
            cur[1] = max(cur[1], e)
    return total + (cur[1] - cur[0] if cur is not None else 0)


def summarize(records, bin_s=1.0, top=3):
    """One text line per bin of `bin_s` seconds from the first record."""
    if not records:
        return ["no records"]
    t0 = min(r[1] for r in records)
    width = int(bin_s * 1e9)
    bins = collections.defaultdict(list)
    for r in records:
        bins[(r[1] - t0) // width].append(r)
    lines = []
    for b in sorted(bins):
        kernels = collections.defaultdict(lambda: [0, 0, 0])  # count, duration, wait
        apis = collections.defaultdict(lambda: [0, 0])  # count, duration
        copies = [0, 0, 0]  # count, duration, bytes
        spans = []
        for kind, s, e, f in bins[b]:
            if kind == "K":
                k = kernels[" ".join(f[6:])[:40]]
                submitted = int(f[4])
                k[0] += 1
                k[1] += e - s
                k[2] += max(0, s - submitted) if submitted else 0
                spans.append((s, e))
            elif kind in ("M", "S"):
                copies[0] += 1
                copies[1] += e - s
                copies[2] += int(f[3])
                spans.append((s, e))
            else:
                a = apis[" ".join(f[4:])]
                a[0] += 1
                a[1] += e - s
        ks = sorted(kernels.items(), key=lambda kv: -kv[1][1])[:top]
        api = sorted(apis.items(), key=lambda kv: -kv[1][1])[:top]
        lines.append(
            f"[{b * bin_s:6.1f} s] gpu {covered(spans) / 1e6:.0f} ms | copies x{copies[0]} "
            f"{copies[1] / 1e6:.0f} ms {copies[2] / 1e6:.0f} MB | "
            + "; ".join(f"{n} x{c} {d / c / 1e3:.0f} us (wait {w / c / 1e3:.0f} us)"
                        for n, (c, d, w) in ks)
            + " | " + ", ".join(f"{n} x{c} {d / 1e6:.0f} ms ({d / c / 1e3:.0f} us)"
                                for n, (c, d) in api))
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace")
    p.add_argument("--bin", type=float, default=1.0, help="seconds per line")
    p.add_argument("--top", type=int, default=3, help="kernels and API calls per line")
    a = p.parse_args(argv)
    if a.bin <= 0 or a.top < 1:
        p.error("--bin must be > 0 and --top >= 1")
    print("\n".join(summarize(read(a.trace), a.bin, a.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
