"""The benchmarks' datasets: made by tools/make_dataset.py, read once into the
page cache, and read by the torch DataLoader they are compared with."""
import os
import subprocess
import sys
from typing import Any, Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PHOTOS = os.path.join(REPO, "..", "shared", "data", "photos")


def default_dataset(images: int) -> str:
    """Where a benchmark makes its dataset of `images` JPEGs unless given one
    (the programs share it: made once, by the first)."""
    return os.path.join("/tmp", f"batchcast-bench-{images}")


def make_dataset(path: str, images: int, classes: Optional[int] = None,
                 photos: Optional[str] = None, workers: Optional[int] = None) -> int:
    """An ImageNet-like folder of about `images` JPEGs (~500x375) at `path`,
    unless it exists: `classes` classes (default images // 32, at most 100),
    cropped from the photos in `photos` (default ../shared/data/photos where
    it exists), else synthesised. Returns the number of files under `path`."""
    if not os.path.isdir(path):
        classes = classes or max(1, min(100, images // 32))
        photos = photos or (PHOTOS if os.path.isdir(PHOTOS) else None)
        cmd = [sys.executable, os.path.join(REPO, "tools", "make_dataset.py"), path,
               "--classes", str(classes), "--per-class", str(max(1, images // classes)),
               "--seed", "1", "--quiet", "--workers", str(workers or os.cpu_count() or 1)]
        subprocess.run(cmd + (["--photos", photos] if photos else []), check=True)
    return sum(len(files) for _, _, files in os.walk(path))


def warm_page_cache(data: str) -> int:
    """Reads every file under `data` once, so that what is measured next finds
    them in the page cache (decode, not the disk); returns the bytes read."""
    n = 0
    for root, _dirs, files in os.walk(data):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                n += len(f.read())
    return n


def torch_dataloader(data: str, size: int, batch_size: int, workers: int,
                     pin_memory: bool = False) -> Any:
    """The reference: torchvision's ImageNet train transform (RandomResizedCrop,
    flip, ToTensor, Normalize: float32 NCHW) over ImageFolder(data) in a
    shuffled torch DataLoader with `workers` persistent workers, every other
    setting torch's default."""
    import torch
    import torchvision.datasets as datasets
    import torchvision.transforms as T

    tf = T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    return torch.utils.data.DataLoader(
        datasets.ImageFolder(data, transform=tf), batch_size=batch_size, shuffle=True,
        num_workers=workers, drop_last=True, pin_memory=pin_memory,
        persistent_workers=workers > 0)
