#!/usr/bin/env python3
"""The Python consumer of bc_soak: a batchcast.Loader that checks what it reads.

  soak_loader.py --endpoint NAME --samples N --size S [--batch-size 64] [--batches K]

Joins with join="next_epoch" and drop_last=False, so each of its epochs must
be one producer epoch: every sample index exactly once. Each batch's image
bytes and labels are checked against the synthetic formula
(core/src/synthetic.h); each finished epoch is reported with the order digest
of tests/stress/epoch_checker.h (sum of (x_i + 1) * K^(i+1) mod 2^64), which
bc_soak compares with Sampler::EpochOrder. Prints the report lines of
tests/stress/report.h on stdout. Exit status 0 after --batches batches, 4
when the Loader raised.
"""
import argparse
import sys
import time

import numpy as np

DIGEST_K = 0x9E3779B97F4A7C15  # epoch_checker.cc's kDigestMultiplier


def now_ms():
    return int(time.clock_gettime(time.CLOCK_MONOTONIC) * 1000)


def say(line):
    print(line, flush=True)


class Checker:
    """The synthetic formula of each batch, and the epoch's exactly-once rule."""

    def __init__(self, samples, size, epoch_len):
        self.samples = samples
        self.epoch_len = epoch_len
        self.offsets = (np.arange(3 * size * size, dtype=np.uint64) % 251)[None, :]
        # K^(i+1) mod 2^64 for i < epoch_len (numpy's uint64 products wrap).
        self.powers = np.cumprod(np.full(epoch_len, DIGEST_K, dtype=np.uint64), dtype=np.uint64)
        self.violations = 0

    def violation(self, what):
        self.violations += 1
        say("VIOLATION " + what.replace("\n", " "))

    def batch(self, images, labels, idx):
        flat = images.numpy().reshape(len(idx), -1)
        base = (idx.astype(np.uint64) * np.uint64(2654435761)) % np.uint64(251)
        expected = ((base[:, None] + self.offsets) % np.uint64(251)).astype(np.uint8)
        if not np.array_equal(flat, expected):
            bad = int(np.count_nonzero((flat != expected).any(axis=1)))
            self.violation(f"{bad} of {len(idx)} images differ from the synthetic formula")
        if not np.array_equal(labels.numpy(), idx % 1000):
            self.violation("labels differ from the synthetic formula")

    def epoch(self, epoch, idx):
        """Checks a finished epoch; returns its digest (None when it broke a rule)."""
        if idx.size != self.epoch_len:
            self.violation(
                f"consumer epoch {epoch} has {idx.size} samples, expected {self.epoch_len}")
            return None
        if (self.epoch_len == self.samples
                and not np.array_equal(np.sort(idx), np.arange(self.samples))):
            self.violation(f"consumer epoch {epoch} does not hold every sample exactly once")
            return None
        return int(((idx.astype(np.uint64) + np.uint64(1)) * self.powers).sum(dtype=np.uint64))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--endpoint", required=True)
    p.add_argument("--samples", type=int, required=True, help="the server's --synthetic")
    p.add_argument("--size", type=int, required=True, help="the server's --size")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--batches", type=int, default=1000)
    args = p.parse_args()

    import batchcast

    batchcast.set_log_level("warn")
    try:
        loader = batchcast.Loader(args.endpoint, batch_size=args.batch_size, drop_last=False,
                                  join="next_epoch", name="soak-python")
    except batchcast.BatchcastError as e:
        say(f"LOST {getattr(e, 'code', 'Unknown')} {now_ms()} {e}")
        return 4
    checker = Checker(args.samples, args.size, loader.epoch_len)
    say(f"CONNECTED {loader.consumer_id} {len(loader)} {now_ms()}")
    batches, epoch, last_progress = 0, 0, 0
    try:
        while batches < args.batches:
            parts = []
            for images, labels in loader:
                idx = loader.indices.numpy()
                checker.batch(images, labels, idx)
                parts.append(idx.copy())
                del images, labels  # the lease ends with the last tensor
                batches += 1
                t = now_ms()
                if t - last_progress >= 100:
                    last_progress = t
                    say(f"PROGRESS {batches} {t}")
                if batches >= args.batches:
                    break
            else:  # the epoch ended
                idx = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
                digest = checker.epoch(epoch, idx)
                if digest is not None:
                    say(f"EPOCH {epoch} 0 {idx.size} {digest}")
                epoch += 1
    except batchcast.BatchcastError as e:
        say(f"LOST {getattr(e, 'code', 'Unknown')} {now_ms()} {e}")
        return 4
    say(f"DONE {batches}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
