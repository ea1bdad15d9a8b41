#!/usr/bin/env python3
"""What an exact resume costs (docs/semantics.md, "Resume").

One server; K "other" Loaders, each in a process of its own, read it on
without pause but for a fixed step time (a training step); one Loader reads,
saves its state_dict() and is killed (SIGKILL); after --gap-s seconds (the
others run on, so its place falls out of the ring; at least --measure-s) a
new process loads the state and reads on for --after-s seconds. Measured, in
one run:

- the time from load_state_dict() to the first batch (the connection is made
  before, as a training script does: Loader, then model, then the state);
- the others' rate (batches/s of each, summed) in the --measure-s seconds
  before the resume and from the resume until the resumed loader merged into
  the shared stream (or the run's end): their ratio is what the catch-up
  cost them;
- the resumed loader's rate until it merged, and how long that took (its
  stats are polled every 20 ms: a server answers a peer's STATS at most 100
  times a second).

The server is an in-process batchcast.Server on synthetic uint8 images (or
--data DIR) on the CPU, or a GPU ring with --device cuda:0.

  python3 benchmarks/resume_cost.py                      # defaults: 2 others, 5 ms steps
  python3 benchmarks/resume_cost.py --others 3 --step-ms 10 --size 128 --json out.json
  python3 benchmarks/resume_cost.py --smoke              # seconds; what CI could run
"""
import argparse
import json
import multiprocessing
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_server import find_build  # noqa: E402


def import_batchcast():
    """batchcast of the build (bench_server.find_build), else the installed one."""
    find_build()
    import batchcast

    batchcast.set_log_level("warn")
    return batchcast


def endless(loader):
    while True:
        yield from loader


def other_main(name, batch, step_s, stop, queue):
    """Reads until `stop` (an Event) is set, a step of `step_s` per batch;
    sends the time of every batch."""
    batchcast = import_batchcast()
    loader = batchcast.Loader(name, batch_size=batch, timeout=60, group=False)
    times = []
    for _ in endless(loader):
        times.append(time.time())
        time.sleep(step_s)
        if stop.is_set():
            break
    queue.put(("other", times))
    loader.close()


def victim_main(name, batch, batches, queue):
    batchcast = import_batchcast()
    loader = batchcast.Loader(name, batch_size=batch, timeout=60, group=False)
    for i, _ in enumerate(endless(loader)):
        if i + 1 == batches:
            break
    queue.put(("state", loader.state_dict()))
    time.sleep(600)  # killed


def resumer_main(name, batch, state, after_s, queue):
    """Loads `state`, reads as fast as it can for `after_s` seconds; sends the
    load-to-first-batch time, the time of every batch and when it merged."""
    batchcast = import_batchcast()
    loader = batchcast.Loader(name, batch_size=batch, timeout=60, group=False)
    cid = loader.consumer_id
    t0 = time.time()
    loader.load_state_dict(state)
    times, merged, polled = [], None, 0.0
    for _ in endless(loader):
        now = time.time()
        times.append(now)
        if merged is None and now - polled >= 0.02:
            polled = now
            me = [c for c in loader.stats()["consumers"] if c["id"] == cid]
            if me and me[0].get("resumed") == "stream":
                merged = time.time()
        if now >= t0 + after_s:
            break
    queue.put(("resumer", t0, times, merged))
    loader.close()


def reporting(target, queue, *args):
    """Runs target(*args, queue) in a child; an exception is sent as ("error",
    its traceback), so that the parent stops instead of waiting."""
    try:
        target(*args, queue)
    except BaseException:
        import traceback

        queue.put(("error", traceback.format_exc()))
        raise


def rate(times, lo, hi):
    n = sum(1 for t in times if lo <= t < hi)
    return n / max(hi - lo, 1e-9)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", help="image folder (default: synthetic images)")
    p.add_argument("--samples", type=int, default=20000, help="synthetic samples")
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=64, help="producer and consumer batch")
    p.add_argument("--window", type=int, default=16)
    p.add_argument("--resume-slots", type=int, default=4)
    p.add_argument("--device", default="cpu", help="the ring: cpu or cuda:N")
    p.add_argument("--workers", type=int, default=0, help="server decode threads")
    p.add_argument("--others", type=int, default=2, help="loaders that keep reading")
    p.add_argument("--step-ms", type=float, default=5.0, help="the others' step time")
    p.add_argument("--victim-batches", type=int, default=50, help="batches before the kill")
    p.add_argument("--gap-s", type=float, default=3.0, help="from the kill to the resume")
    p.add_argument("--measure-s", type=float, default=4.0,
                   help="the others' rate before the resume is over this many seconds")
    p.add_argument("--after-s", type=float, default=15.0, help="run on after the resume")
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--smoke", action="store_true", help="tiny and fast")
    args = p.parse_args()
    if args.smoke:
        args.samples, args.size, args.gap_s, args.measure_s, args.after_s = 2000, 16, 1.0, 1.0, 3.0
        args.victim_batches = 5
    batchcast = import_batchcast()
    ctx = multiprocessing.get_context("spawn")
    name = f"resume-cost-{os.getpid()}"
    options = dict(size=args.size, batch_size=args.batch_size, window=args.window,
                   resume_slots=args.resume_slots, device=args.device, name=name,
                   min_consumers=args.others + 1)
    if args.workers:
        options["workers"] = args.workers
    server = (batchcast.Server(args.data, **options) if args.data
              else batchcast.Server(synthetic=args.samples, **options))
    queue = ctx.Queue()
    stop = ctx.Event()
    others = [ctx.Process(target=reporting,
                          args=(other_main, queue, name, args.batch_size, args.step_ms / 1000,
                                stop))
              for _ in range(args.others)]
    # The victim reports on a queue of its own: killed, it may die holding its
    # queue's write lock (its feeder thread between sending and releasing).
    victim_queue = ctx.Queue()
    victim = ctx.Process(target=reporting, args=(victim_main, victim_queue, name,
                                                 args.batch_size, args.victim_batches))
    for proc in others + [victim]:
        proc.start()
    # The server writes once all have joined (min_consumers): when the victim
    # has its batches, the others read too.
    msg = victim_queue.get(timeout=120)
    if msg[0] == "error":
        sys.exit(f"the loader to resume failed:\n{msg[1]}")
    state = msg[1]
    os.kill(victim.pid, signal.SIGKILL)
    victim.join()
    time.sleep(max(args.gap_s, args.measure_s))
    resumer = ctx.Process(target=reporting,
                          args=(resumer_main, queue, name, args.batch_size, state, args.after_s))
    resumer.start()
    got = {"other": []}
    while len(got["other"]) < args.others or "resumer" not in got:
        m = queue.get(timeout=args.after_s + 120)
        if m[0] == "error":
            stop.set()
            sys.exit(f"a loader failed:\n{m[1]}")
        if m[0] == "other":
            got["other"].append(m[1])
        else:
            got["resumer"] = m[1:]
            stop.set()  # the others read on until the resumed loader is done
    for proc in others + [resumer]:
        proc.join(10)
    stats = server.stats()
    server.close()
    t0, r_times, merged = got["resumer"]
    first = r_times[0] - t0
    end = merged or r_times[-1]
    before = sum(rate(t, t0 - args.measure_s, t0) for t in got["other"])
    during = sum(rate(t, t0, end) for t in got["other"])
    catch_up = rate(r_times, t0, end)
    lane = stats.get("resume_lane", {})
    figures = {
        "others": args.others, "step_ms": args.step_ms, "batch": args.batch_size,
        "size": args.size, "device": args.device, "window": args.window,
        "resume_slots": args.resume_slots,
        "state": {k: state[k] for k in ("epoch", "step", "next_seq")},
        "load_to_first_batch_s": first,
        "merged_after_s": (merged - t0) if merged else None,
        "others_batches_per_s_before": before,
        "others_batches_per_s_during": during,
        "others_ratio": during / max(before, 1e-9),
        "resumer_batches_per_s_until_merge": catch_up,
        "lane_batches": lane.get("batches_written"),
        "stream_moves": stats.get("stream_moves"),
    }
    print(f"resume at epoch {state['epoch']} after {state['step']} batches "
          f"(seq {state['next_seq']}); {args.others} others of {args.step_ms} ms steps, "
          f"batch {args.batch_size}, {args.size}px, ring {args.device}")
    print(f"  load_state_dict -> first batch: {1000 * first:.1f} ms")
    print(f"  others: {before:.1f} batches/s before, {during:.1f} while it caught up "
          f"(ratio {figures['others_ratio']:.3f})")
    if merged:
        print(f"  resumed loader: {catch_up:.1f} batches/s from its lane, merged after "
              f"{merged - t0:.2f} s ({figures['lane_batches']} lane batches)")
    else:
        print(f"  resumed loader: {catch_up:.1f} batches/s from its lane, not merged in "
              f"{r_times[-1] - t0:.1f} s ({figures['lane_batches']} lane batches)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)


if __name__ == "__main__":
    main()
