#!/usr/bin/env python3
"""Summarizes a trace of benchmarks/cupti_trace.cc, one line per time bin.

  python3 benchmarks/cupti_stats.py TRACE [--bin 1.0] [--top 3] [--threads]

Per bin: the GPU time the process's kernels and copies covered (their
union), its copies (count, time, bytes), its kernels with the most GPU time
(count, mean duration, mean wait from submission to start) and the CUDA API
calls that held its threads longest (count, total time, mean per call).
A bin where one API call is made about once per image, and its mean is far
above the work it waits for, is a round trip per image (issue 9).

With --threads, per bin and per thread (by name, e.g. bc-producer beside the
trainer's python3 when the server runs in the trainer's process): the API
calls that held the thread longest, and the kernels and copies it launched,
per stream, with how long each kernel waited between its submission and its
start (p50 / p90): whether a thread's waits are for its own work or for
another's kernels ahead of it on the GPU.
"""
import argparse
import collections
import sys


# Fields of each record kind (cupti_trace.cc's lines), after kind, start, end.
KERNEL_NAME = 7  # K start end queued submitted stream corr name...
API_NAME = 5  # R|D start end thread corr name


def read(path):
    """The trace's records as (kind, start, end, fields), and its thread
    names {tid: name} (T lines)."""
    records, names = [], {}
    with open(path, errors="replace") as f:
        for line in f:
            fields = line.rstrip("\n").split(" ")
            if len(fields) >= 3 and fields[0] == "T":
                names[fields[1]] = " ".join(fields[2:])
                continue
            if len(fields) < 4 or fields[0] not in ("K", "M", "S", "R", "D"):
                continue
            try:
                start, end = int(fields[1]), int(fields[2])
            except ValueError:
                continue
            if start > 0 and end >= start:
                records.append((fields[0], start, end, fields))
    return records, names


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


def binned(records, bin_s):
    """{bin index: records starting in it}, bins of `bin_s` seconds from the
    first record."""
    t0 = min(r[1] for r in records)
    width = int(bin_s * 1e9)
    bins = collections.defaultdict(list)
    for r in records:
        bins[(r[1] - t0) // width].append(r)
    return bins


def summarize(records, bin_s=1.0, top=3):
    """One text line per bin of `bin_s` seconds from the first record."""
    if not records:
        return ["no records"]
    bins = binned(records, bin_s)
    lines = []
    for b in sorted(bins):
        kernels = collections.defaultdict(lambda: [0, 0, 0])  # count, duration, wait
        apis = collections.defaultdict(lambda: [0, 0])  # count, duration
        copies = [0, 0, 0]  # count, duration, bytes
        spans = []
        for kind, s, e, f in bins[b]:
            if kind == "K":
                k = kernels[" ".join(f[KERNEL_NAME:])[:40]]
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
                a = apis[" ".join(f[API_NAME:])]
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


def quantile(values, q):
    """The q-quantile of a non-empty list (nearest rank)."""
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def by_thread(records, names, bin_s=2.0, top=4):
    """Per bin, per thread that made CUDA calls: its `top` API calls by time
    (count, total, mean, p90), then the kernels and copies it launched (found
    through the correlation id of the launching call), per stream: count,
    mean duration and, for kernels, the wait from submission to start."""
    if not records:
        return ["no records"]
    launcher = {}  # correlation id -> thread id
    for kind, _, _, f in records:
        if kind in ("R", "D") and len(f) > API_NAME:
            launcher[f[4]] = f[3]
    lines = []
    for b, recs in sorted(binned(records, bin_s).items()):
        apis = collections.defaultdict(lambda: collections.defaultdict(list))
        work = collections.defaultdict(lambda: collections.defaultdict(list))
        for kind, s, e, f in recs:
            if len(f) <= (KERNEL_NAME if kind == "K" else 6 if kind == "M" else 5):
                continue  # a line cut short (the trace of a killed process)
            if kind in ("R", "D"):
                apis[f[3]][" ".join(f[API_NAME:])].append(e - s)
            elif kind == "K":
                key = (f"stream {f[5]}", " ".join(f[KERNEL_NAME:])[:40])
                wait = max(0, s - int(f[4])) if int(f[4]) else 0
                work[launcher.get(f[6], "?")][key].append((e - s, wait))
            elif kind == "M":
                work[launcher.get(f[6], "?")][(f"stream {f[4]}", f"copy kind {f[5]}")].append(
                    (e - s, None))
        lines.append(f"[{b * bin_s:6.1f} s]")
        for tid in sorted(apis, key=lambda t: -sum(sum(v) for v in apis[t].values())):
            calls = sorted(apis[tid].items(), key=lambda kv: -sum(kv[1]))[:top]
            lines.append(f"  {names.get(tid, '?')} ({tid}): " + ", ".join(
                f"{n} x{len(d)} {sum(d) / 1e6:.0f} ms ({sum(d) / len(d) / 1e3:.0f} us, "
                f"p90 {quantile(d, 0.9) / 1e3:.0f} us)" for n, d in calls))
            launched = sorted(work.get(tid, {}).items(), key=lambda kv: -len(kv[1]))[:top]
            for (stream, what), runs in launched:
                dur = [r[0] for r in runs]
                text = f"    {stream} {what} x{len(runs)} {sum(dur) / len(dur) / 1e3:.0f} us"
                waits = [r[1] for r in runs if r[1] is not None]
                if waits:
                    text += (f" (wait p50 {quantile(waits, 0.5) / 1e3:.0f} us, "
                             f"p90 {quantile(waits, 0.9) / 1e3:.0f} us)")
                lines.append(text)
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace")
    p.add_argument("--bin", type=float, default=1.0, help="seconds per line")
    p.add_argument("--top", type=int, default=3, help="kernels and API calls per line")
    p.add_argument("--threads", action="store_true",
                   help="per thread: its API calls and the work it launched (see above)")
    a = p.parse_args(argv)
    if a.bin <= 0 or a.top < 1:
        p.error("--bin must be > 0 and --top >= 1")
    records, names = read(a.trace)
    lines = by_thread(records, names, a.bin, a.top) if a.threads else summarize(records, a.bin, a.top)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
