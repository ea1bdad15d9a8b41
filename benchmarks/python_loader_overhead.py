#!/usr/bin/env python3
"""Per-batch overhead of iterating a batchcast.Loader versus pre-made tensors.

    BATCHCAST_BUILD_DIR=build-py /usr/bin/python3 benchmarks/python_loader_overhead.py
    ... --batch-size 64 --size 8 --batches 20000 --server binary

What is timed (the consumer loop does nothing with the batch but hold it until
the next one, like a training step would):

  premade     `for images, labels in batches` over a list of pre-made tensors
              (the floor: the Python for loop itself)
  core.next   batchcast._core.Consumer.next() alone: C++ Next() (ZeroMQ reply,
              lease) + DLPack capsules + the indices array; capsules dropped
  loader      `for images, labels in batchcast.Loader(...)`: the above plus
              torch tensors from the capsules (from_dlpack) and their release
              (DLPack deleter -> RELEASE message)
  dataloader  torch DataLoader(TensorDataset, num_workers=0) over the same
              number of samples, for reference

overhead = loader - premade, per batch. The producer runs with tiny samples
(--size 8: 192 bytes) so that its cost does not hide the consumer's; on a
2-core machine the producer's threads still share the cores with the loop, so
the figures are an upper bound of the client's own cost. A batch equal to the
producer batch is zero-copy; --batch-size not dividing it makes gathered
copies of batches that span two slots (reported as zero-copy share). With
large samples (e.g. --size 64 --batch-size 256) the loop waits for the
producer (synthetic fill, one worker) and the figure is the producer's time
per batch, not the Loader's overhead.
"""
import argparse
import os
import statistics
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_server import ServerProcess, find_build, server_bin  # noqa: E402


def timed_loop(iterable, batches, warmup):
    """Mean and median seconds per batch over `batches` iterations after `warmup`."""
    it = iter(iterable)
    for _ in range(warmup):
        next(it)
    stamps = [0.0] * (batches + 1)
    clock = time.perf_counter
    stamps[0] = clock()
    i = 1
    for _batch in it:
        stamps[i] = clock()
        i += 1
        if i > batches:
            break
    deltas = [b - a for a, b in zip(stamps, stamps[1:])]
    return (stamps[-1] - stamps[0]) / batches, statistics.median(deltas)


def endless(loader):
    while True:
        yield from loader


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch-size", type=int, default=64, help="consumer batch (default 64)")
    p.add_argument("--producer-batch", type=int, default=64)
    p.add_argument("--window", type=int, default=8)
    p.add_argument("--size", type=int, default=8, help="synthetic image size (3 x S x S uint8)")
    p.add_argument("--samples", type=int, default=102400, help="synthetic dataset size")
    p.add_argument("--batches", type=int, default=20000, help="timed batches per measurement")
    p.add_argument("--warmup", type=int, default=500)
    p.add_argument("--server", choices=["inproc", "binary"], default="inproc",
                   help="in-process batchcast.Server, or a batchcast-server process")
    p.add_argument("--repeats", type=int, default=3, help="repeat each measurement, keep the best")
    args = p.parse_args()

    build = find_build()
    import torch

    import batchcast
    from batchcast import _core

    batchcast.set_log_level("warn")
    torch.set_num_threads(1)
    name = f"bench-overhead-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    options = dict(synthetic=args.samples, size=args.size, batch_size=args.producer_batch,
                   window=args.window, workers=1)
    if args.server == "inproc":
        server = batchcast.Server(name=name, **options)
    else:
        server = ServerProcess(server_bin(build), name, options)
    try:
        results = {}
        b = args.batch_size
        premade = [(torch.zeros(b, 3, args.size, args.size, dtype=torch.uint8),
                    torch.zeros(b, dtype=torch.int64)) for _ in range(64)]

        def premade_iter():
            while True:
                yield from premade

        results["premade"] = min(timed_loop(premade_iter(), args.batches, args.warmup)
                                 for _ in range(args.repeats))

        consumer = _core.Consumer(name, b)

        def core_iter():
            nxt = consumer.next
            while True:
                item = nxt()
                if item is not None:
                    yield item

        results["core.next"] = min(timed_loop(core_iter(), args.batches, args.warmup)
                                   for _ in range(args.repeats))
        consumer.close()

        loader = batchcast.Loader(name, batch_size=b)
        zero_copy = []

        def loader_iter():
            for batch in endless(loader):
                zero_copy.append(loader.zero_copy)
                yield batch

        plain = min(timed_loop(endless(loader), args.batches, args.warmup)
                    for _ in range(args.repeats))
        results["loader"] = plain
        results["loader+zero_copy flag"] = timed_loop(loader_iter(), args.batches, args.warmup)
        loader.close()

        ds = torch.utils.data.TensorDataset(
            torch.zeros(args.samples, 3, args.size, args.size, dtype=torch.uint8),
            torch.zeros(args.samples, dtype=torch.int64))
        dl = torch.utils.data.DataLoader(ds, batch_size=b, num_workers=0)

        def dl_iter():
            while True:
                yield from dl

        results["dataloader"] = timed_loop(dl_iter(), min(args.batches, 5000), 50)
    finally:
        if args.server == "inproc":
            server.close()
        else:
            server.stop()

    print(f"batchcast Loader overhead: consumer batch {args.batch_size}, producer batch "
          f"{args.producer_batch}, window {args.window}, uint8[3,{args.size},{args.size}], "
          f"server {args.server}, torch {torch.__version__}, {os.cpu_count()} cores")
    print(f"{'loop':<24}{'mean us/batch':>15}{'median us/batch':>17}")
    for key, (mean, median) in results.items():
        print(f"{key:<24}{mean * 1e6:>15.2f}{median * 1e6:>17.2f}")
    over_mean = (results["loader"][0] - results["premade"][0]) * 1e6
    over_median = (results["loader"][1] - results["premade"][1]) * 1e6
    share = sum(zero_copy) / max(1, len(zero_copy))
    print(f"overhead (loader - premade): {over_mean:.2f} us/batch mean, "
          f"{over_median:.2f} us median; "
          f"zero-copy batches {share:.0%}")
    print(f"target < 100 us/batch: {'met' if over_mean < 100 else 'NOT met'}")


if __name__ == "__main__":
    main()
