#!/usr/bin/env python3
"""Images/s: batchcast's CPU pipeline against a torch DataLoader, same workers.

    BATCHCAST_BUILD_DIR=build PYTHONPATH=build/python /usr/bin/python3 \\
        benchmarks/cpu_pipeline_vs_dataloader.py [--images 2000] [--workers 1 2] \\
        [--rounds 3] [--epochs 2] [--data DIR] [--format jpeg|png]

Both sides run torchvision's ImageNet train transform (RandomResizedCrop(224),
RandomHorizontalFlip(), ToTensor(), Normalize(ImageNet mean/std): float32
NCHW) on the same ImageNet-like folder, batch 64, shuffled, with the same
number of workers, and are consumed the same way: a Python loop in this
process that takes each batch as torch tensors and touches nothing else.

  batchcast   `batchcast-server serve DATA --workers N --transform train
              --dtype float32` (N decode threads), read by `batchcast.Loader`
              (zero-copy tensors over the shared ring) in this process.
  DataLoader  `ImageFolder(DATA, transform)` + `DataLoader(num_workers=N,
              shuffle=True, persistent_workers=True, pin_memory=False)`, every
              other setting torch's default (prefetch_factor 2, PIL decode).

Method: each measurement runs one warm-up epoch (server start, header scan,
ring fill / worker start-up) and then --epochs measured epochs; its rate is
images / wall seconds over the measured epochs. The rounds alternate which
side runs first, and the table gives the median over the rounds of each side
and of the per-round ratio (both sides of a round ran back to back, so the
ratio sees the same load). The "CPU ratio" is the DataLoader's CPU per image
over batchcast's: unlike the rates, it hardly depends on the share of the
cores each side got on a shared machine. Next to each rate: the CPU seconds
the side used per image (its server or worker processes plus this process);
"workers asleep", the median over the side's working threads (those that
ran at least half as much as the busiest) of the share of the wall time
they were neither running nor waiting for a core (/proc/PID/task/*/
schedstat): near 0 the side is CPU-bound, high it stalls; and "others", the
cores that processes other than this benchmark kept busy meanwhile (from
/proc/stat), which is the load that was sharing the machine.

--format png serves the same folder as 8-bit RGB PNGs (each JPEG decoded and
written as a PNG, DIR-png next to DIR): the formats other than JPEG take
batchcast's whole-image decode (libpng) and the crop, resize and output pass of
the JPEG path, while the DataLoader's PIL decodes them as it does any file.

The files are read from the page cache (the dataset is small; a second run
finds it there), as for any dataset that fits in memory. Neither side caches
decoded images: batchcast's CPU path decodes every sample of every epoch
(the device cache exists only on the GPU path), so the rates hold for
datasets of any size whose files the OS can read this fast.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_files import make_dataset, torch_dataloader, warm_page_cache  # noqa: E402
from bench_proc import cpu_seconds  # noqa: E402
from bench_server import ServerProcess, find_build, server_bin  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tools"))
from dataset_maker.formats import encode  # noqa: E402

BUILD = find_build()
TICK = os.sysconf("SC_CLK_TCK")
BATCH = 64


def machine_busy_seconds():
    """CPU seconds all processes of the machine spent busy (not idle/iowait)."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]
    return (sum(values[:8]) - idle) / TICK


def thread_times(pids):
    """{(pid, tid): (ns on a CPU, ns runnable waiting for a CPU)} of every thread."""
    times = {}
    for pid in pids:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    on, wait = f.read().split()[:2]
            except OSError:  # the thread ended
                continue
            times[(pid, tid)] = (int(on), int(wait))
    return times


def idle_fraction(t0, t1, seconds):
    """Median over the side's working threads (those that ran at least half as
    much as the busiest) of the fraction of the wall time they were asleep:
    neither running nor waiting for a core. High means the side stalls."""
    deltas = [((t1[k][0] - t0[k][0]) / 1e9, (t1[k][1] - t0[k][1]) / 1e9) for k in t1 if k in t0]
    busiest = max((on for on, _ in deltas), default=0.0)
    asleep = [max(0.0, 1 - (on + wait) / seconds) for on, wait in deltas if on >= busiest / 2]
    return statistics.median(asleep) if asleep else 0.0


class Meter:
    """Wall time, the CPU seconds of `pids`, the busy time of everything else,
    and how much of the time the working threads of `pids` were asleep."""

    def __init__(self, pids):
        self.pids = pids

    def __enter__(self):
        self.t0 = time.perf_counter()
        self.cpu0 = sum((cpu_seconds(p) or 0.0) for p in self.pids)
        self.busy0 = machine_busy_seconds()
        self.threads0 = thread_times(self.pids)
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0
        self.cpu = sum((cpu_seconds(p) or 0.0) for p in self.pids) - self.cpu0
        self.others = max(0.0, machine_busy_seconds() - self.busy0 - self.cpu) / self.seconds
        self.idle = idle_fraction(self.threads0, thread_times(self.pids), self.seconds)


def run_epochs(loader, epochs, pids):
    n = 0
    for images, _labels in loader:  # warm-up epoch
        pass
    with Meter(pids) as m:
        for _ in range(epochs):
            for images, _labels in loader:
                n += images.shape[0]
    return {"rate": n / m.seconds, "cpu_ms": 1000 * m.cpu / n, "others": m.others,
            "idle": m.idle}


def bench_batchcast(data, workers, epochs):
    import batchcast

    options = {"workers": workers, "batch_size": BATCH, "window": 8, "size": 224,
               "dtype": "float32", "transform": "train"}
    with tempfile.TemporaryFile(mode="w+") as log:
        try:
            with ServerProcess(server_bin(BUILD), f"bench-cpu-{os.getpid()}-{workers}", options,
                               data=data, log=log) as server, \
                    batchcast.Loader(server.name, batch_size=BATCH) as loader:
                return run_epochs(loader, epochs, [server.pid, os.getpid()])
        except BaseException:
            log.seek(0)
            sys.stderr.write(log.read())
            raise


def bench_dataloader(data, workers, epochs):
    loader = torch_dataloader(data, 224, BATCH, workers)
    it = iter(loader)  # starts the persistent workers: their pids
    pids = [w.pid for w in it._workers] + [os.getpid()]
    del it
    try:
        return run_epochs(loader, epochs, pids)
    finally:
        del loader


def png_copy(src, dst):
    """dst: the ImageFolder tree src with every image as an 8-bit RGB PNG (unless it exists)."""
    if os.path.isdir(dst):
        return
    from PIL import Image
    tmp = dst + ".tmp"
    for root, _dirs, files in os.walk(src):
        out = os.path.join(tmp, os.path.relpath(root, src))
        os.makedirs(out, exist_ok=True)
        for name in files:
            with Image.open(os.path.join(root, name)) as img:
                data, ext = encode("png", img)
            with open(os.path.join(out, os.path.splitext(name)[0] + ext), "wb") as f:
                f.write(data)
    os.rename(tmp, dst)


def fmt(r):
    return (f"{r['rate']:6.0f} img/s {r['cpu_ms']:5.2f} cpu-ms/img, workers asleep "
            f"{100 * r['idle']:.0f}%")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--images", type=int, default=2000)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=2, help="measured epochs per run")
    p.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "batchcast-bench-cpu"))
    p.add_argument("--format", choices=("jpeg", "png"), default="jpeg",
                   help="png: serve the folder as PNGs (DIR-png)")
    args = p.parse_args()
    import torch
    import torchvision
    import PIL
    torch.set_num_threads(1)  # this process only iterates
    make_dataset(args.data, args.images, classes=10)
    if args.format == "png":
        png_copy(args.data, args.data + "-png")
        args.data += "-png"
    size = warm_page_cache(args.data)
    print(f"dataset {args.data} ({args.format}): {size / 2**20:.0f} MiB, read once so that it "
          f"is in the page cache; machine: {os.cpu_count()} cores; "
          f"torch {torch.__version__}, torchvision {torchvision.__version__}, "
          f"Pillow {PIL.__version__}; load avg {os.getloadavg()[0]:.2f}", flush=True)
    sides = {"batchcast": bench_batchcast, "DataLoader": bench_dataloader}
    results = {(w, s): [] for w in args.workers for s in sides}
    ratios = {w: [] for w in args.workers}
    for r in range(args.rounds):
        for w in args.workers:
            order = list(sides) if r % 2 == 0 else list(reversed(sides))
            got = {}
            for s in order:
                got[s] = sides[s](args.data, w, args.epochs)
                results[(w, s)].append(got[s])
            ratio = got["batchcast"]["rate"] / got["DataLoader"]["rate"]
            ratios[w].append(ratio)
            print(f"round {r} workers {w}: batchcast {fmt(got['batchcast'])} (others "
                  f"{got['batchcast']['others']:.2f} cores) | DataLoader {fmt(got['DataLoader'])} "
                  f"(others {got['DataLoader']['others']:.2f} cores) | ratio {ratio:.2f}, "
                  f"CPU ratio {got['DataLoader']['cpu_ms'] / got['batchcast']['cpu_ms']:.2f}",
                  flush=True)
    print(f"\nmedians over {args.rounds} rounds ({args.epochs} measured epochs of "
          f"{args.images} images each):")
    print(f"{'workers':>7} {'batchcast img/s':>16} {'cpu-ms/img':>10} {'DataLoader img/s':>17} "
          f"{'cpu-ms/img':>10} {'ratio':>6} {'CPU ratio':>9} {'asleep bc/DL':>12} "
          f"{'others (cores)':>15}")
    for w in args.workers:
        med = {s: {k: statistics.median(x[k] for x in results[(w, s)])
                   for k in ("rate", "cpu_ms", "others", "idle")} for s in sides}
        others = statistics.median(x["others"] for s in sides for x in results[(w, s)])
        print(f"{w:>7} {med['batchcast']['rate']:>16.0f} {med['batchcast']['cpu_ms']:>10.2f} "
              f"{med['DataLoader']['rate']:>17.0f} {med['DataLoader']['cpu_ms']:>10.2f} "
              f"{statistics.median(ratios[w]):>6.2f} "
              f"{med['DataLoader']['cpu_ms'] / med['batchcast']['cpu_ms']:>9.2f} "
              f"{100 * med['batchcast']['idle']:>5.0f}%/{100 * med['DataLoader']['idle']:>4.0f}% "
              f"{others:>15.2f}")


if __name__ == "__main__":
    main()
