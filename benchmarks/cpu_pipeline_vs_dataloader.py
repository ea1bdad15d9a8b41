#!/usr/bin/env python3
"""Images/s per core: batchcast's CPU pipeline against a torch DataLoader.

Both run the ImageNet train transform (RandomResizedCrop 224, horizontal flip,
ToTensor/Normalize, float32, NCHW) on the same ImageNet-like folder, side by
side in one run, with the same number of workers:

  /usr/bin/python3 benchmarks/cpu_pipeline_vs_dataloader.py [--images 2000] [--workers 1 2]

batchcast: `batchcast-server serve DATA --workers N` and one consumer process
reading as fast as it can (zero copy); the rate is taken over whole epochs
after the first. DataLoader: torchvision ImageFolder + the same transforms,
num_workers=N, batch 64, also after a warm-up epoch.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BATCHCAST_BUILD_DIR", os.path.join(ROOT, "build"))


def make_dataset(path, images):
    if os.path.isdir(path):
        return
    photos = os.path.join(ROOT, "..", "shared", "data", "photos")
    args = [sys.executable, os.path.join(ROOT, "tools", "make_dataset.py"), path,
            "--classes", "10", "--per-class", str(images // 10), "--quiet"]
    if os.path.isdir(photos):
        args += ["--photos", photos]
    subprocess.run(args, check=True)


def bench_batchcast(data, workers, epochs):
    name = f"bench-cpu-{os.getpid()}-{workers}"
    server = subprocess.Popen(
        [os.path.join(BUILD, "tools", "batchcast-server"), "serve", data, "--name", name,
         "--workers", str(workers), "--batch-size", "64", "--window", "8", "--size", "224",
         "--dtype", "float32", "--transform", "train", "--status-interval", "0",
         "--log-level", "warn"])
    try:
        for _ in range(600):  # the server scans the headers first
            if subprocess.run([os.path.join(BUILD, "tools", "batchcast-server"), "stat", name],
                              capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        consumer = subprocess.run(
            [os.path.join(BUILD, "examples", "consumer"), name, "--batch-size", "64",
             "--epochs", str(epochs)], capture_output=True, text=True, check=True)
    finally:
        server.terminate()
        server.wait()
    rates = [float(line.split(" samples/s")[0].rsplit(",", 1)[1])
             for line in consumer.stdout.splitlines() if "samples/s" in line]
    return sum(rates[1:]) / len(rates[1:])  # epochs after the first


def bench_dataloader(data, workers, epochs):
    import torch
    import torchvision.datasets as datasets
    import torchvision.transforms as T
    torch.set_num_threads(1)
    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225])])
    ds = datasets.ImageFolder(data, transform=tf)
    loader = torch.utils.data.DataLoader(ds, batch_size=64, shuffle=True, num_workers=workers,
                                         drop_last=True, persistent_workers=True)
    rates = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        n = 0
        for images, _labels in loader:
            n += images.shape[0]
        rates.append(n / (time.perf_counter() - t0))
    return sum(rates[1:]) / len(rates[1:])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--images", type=int, default=2000)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "batchcast-bench-cpu"))
    args = p.parse_args()
    make_dataset(args.data, args.images)
    print(f"dataset {args.data}: {args.images} images; machine: {os.cpu_count()} cores")
    print(f"{'workers':>7} {'batchcast img/s':>16} {'per core':>9} {'DataLoader img/s':>17} {'per core':>9} {'ratio':>6}")
    for w in args.workers:
        bc = bench_batchcast(args.data, w, args.epochs)
        dl = bench_dataloader(args.data, w, args.epochs)
        print(f"{w:>7} {bc:>16.0f} {bc / w:>9.0f} {dl:>17.0f} {dl / w:>9.0f} {bc / dl:>6.2f}", flush=True)


if __name__ == "__main__":
    main()
