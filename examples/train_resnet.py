#!/usr/bin/env python3
"""Train a torchvision ResNet-18 from a torch DataLoader or from a batchcast server,
printing images/s per epoch. The only difference between the two is where the
batches come from (see make_batches()): a batchcast.Loader replaces the
DataLoader in two lines.

Usage:

  # 1. Baseline: a torch DataLoader over an ImageFolder (decodes in this process' workers)
  python3 examples/train_resnet.py --data /path/to/train --size 64 --steps 20 --workers 2

  # 2. Shared: one server decodes and augments every image once ...
  batchcast-server serve /path/to/train --name imagenet --size 64 --batch-size 64 &
  #    ... and any number of training processes read its batches zero-copy:
  python3 examples/train_resnet.py --shared imagenet --batch-size 32 --steps 20
  python3 examples/train_resnet.py --shared imagenet --batch-size 64 --steps 20 --lr 0.2

  # 3. Self-contained demo (no dataset, no server to start): an in-process
  #    batchcast.Server over synthetic uint8 images, then the same loop as 2.
  python3 examples/train_resnet.py --synthetic 1024 --size 64 --steps 5 --epochs 2

  # 4. Checkpoints with the loader's place, and an exact resume after a kill:
  python3 examples/train_resnet.py --shared imagenet --checkpoint ckpt.pt --checkpoint-every 100
  python3 examples/train_resnet.py --shared imagenet --checkpoint ckpt.pt --resume ckpt.pt

Options: --device cpu|cuda, --steps N (steps per epoch; 0 = whole epochs),
--epochs E, --batch-size B, --size S (input size), --lr, --num-classes,
--log-every N (steps between "input-bound N%" lines: the share of the time
since the previous line that the loop waited for data; a batchcast Loader
measures it itself, Loader.stats(server=False), which is the one line to
send to TensorBoard or W&B),
--checkpoint PATH (saved after every epoch, and every --checkpoint-every N
steps: the model, the optimizer and, from batchcast, the loader's
state_dict()), --resume PATH (continues from such a checkpoint: a batchcast
loader goes on with exactly the batches it would have got next, against the
same server or one restarted with the same options).

Small settings (e.g. demo 3 with --size 64 --steps 5) run in well under a
minute on a 2-core CPU. On the GPU host use --device cuda; batchcast tensors
then live where the server's ring is (--device cuda:0 on the server for CUDA
IPC, else host memory copied to the GPU here).

Batches from a server may be uint8 (synthetic, or --dtype uint8) or already
normalized float32/float16/bfloat16; uint8 batches are normalized here. With
--steps, a batchcast epoch stops after N steps and the next loop resumes the
same consumer epoch (the stream cannot rewind), while a DataLoader starts a new
pass.
"""
import argparse
import os
import sys
import time

import torch
import torch.nn as nn

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="See the top of this file for usage examples.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", metavar="DIR", help="ImageFolder directory (torch DataLoader)")
    src.add_argument("--shared", metavar="NAME", help="batchcast server name or endpoint")
    src.add_argument("--synthetic", metavar="N", type=int,
                     help="demo: an in-process batchcast server over N synthetic images")
    p.add_argument("--device", default="cpu", help="cpu or cuda (cuda:N)")
    p.add_argument("--steps", type=int, default=0, help="steps per epoch (0 = whole epochs)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--size", type=int, default=64, help="input size (DataLoader and --synthetic)")
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers (--data)")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--num-classes", type=int, default=None,
                   help="default: the ImageFolder's class count, else 1000")
    p.add_argument("--join", default="immediate", choices=["immediate", "next_epoch"],
                   help="batchcast join policy (--shared)")
    p.add_argument("--log-every", type=int, default=10, metavar="N",
                   help="steps between 'input-bound N%%' lines (0 = none)")
    add_checkpoint_args(p)
    return p.parse_args()


def add_checkpoint_args(p):
    p.add_argument("--checkpoint", metavar="PATH",
                   help="save model, optimizer and loader state here after every epoch")
    p.add_argument("--checkpoint-every", type=int, default=0, metavar="N",
                   help="also save every N steps (0 = at epoch ends only)")
    p.add_argument("--resume", metavar="PATH", help="continue from this checkpoint")


def save_checkpoint(path, model, opt, epoch, loader):
    """The model, the optimizer, the training loop's epoch and the loader's place
    (batchcast.Loader.state_dict(): a small dict that torch.save keeps)."""
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch}
    if hasattr(loader, "state_dict"):
        state["loader"] = loader.state_dict()
    torch.save(state, path + ".tmp")
    os.replace(path + ".tmp", path)  # a kill while saving keeps the last one


def load_checkpoint(path, model, opt, loader, device, epochs):
    """The epoch to continue; the loader goes on exactly where it was saved.
    Says so when the checkpoint is already past `epochs` (nothing to train)."""
    state = torch.load(path, map_location=device)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    if "loader" in state and hasattr(loader, "load_state_dict"):
        loader.load_state_dict(state["loader"])  # before the first batch
        print(f"resumed from {path}: epoch {state['loader']['epoch']} after "
              f"{state['loader']['step']} batches", flush=True)
    if state["epoch"] >= epochs:
        print(f"{path} holds {state['epoch']} finished epoch(s): --epochs {epochs} leaves "
              "nothing to train (raise --epochs to go on)", flush=True)
    return state["epoch"]


def import_batchcast():
    try:
        import batchcast
    except ImportError:
        # Not installed: try the build tree (BATCHCAST_BUILD_DIR, else build-py/).
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        build = os.environ.get("BATCHCAST_BUILD_DIR", os.path.join(repo, "build-py"))
        build = build if os.path.isabs(build) else os.path.join(repo, build)
        sys.path.insert(0, os.path.join(build, "python"))
        import batchcast
    return batchcast


def model_input(images, labels, device, num_classes, mean, std):
    """(normalized float images in channels_last, int64 labels) on `device`; uint8
    batches are normalized here, others are taken as normalized."""
    images = images.to(device, non_blocking=True)
    labels = labels.to(device, non_blocking=True).long() % num_classes
    if images.dtype == torch.uint8:
        x = (images.float().div_(255) - mean) / std
    else:
        x = images.float()
    return x.contiguous(memory_format=torch.channels_last), labels


def sgd_step(model, opt, loss_fn, x, labels):
    """One optimizer step; returns the loss (.item() also synchronizes CUDA, for
    honest timing)."""
    loss = loss_fn(model(x), labels)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.item()


def epoch_figures(images, elapsed, loss, wait):
    """'N images in T s = R images/s, loss L, waiting for data W%'."""
    return (f"{images} images in {elapsed:.2f} s = {images / max(elapsed, 1e-9):.1f} images/s, "
            f"loss {loss:.3f}, waiting for data {100 * wait / max(elapsed, 1e-9):.0f}%")


class InputBound:
    """The share of the time since the previous take() that the loop waited for
    data. A batchcast Loader measures it itself (one line, what a training
    script sends to TensorBoard or W&B); for a DataLoader the loop's own
    timing (waited()) is used."""

    def __init__(self, batches):
        self._loader = batches if hasattr(batches, "stats") else None  # batchcast.Loader
        self._wait, self._since = 0.0, time.perf_counter()

    def waited(self, seconds):
        self._wait += seconds

    def take(self):
        if self._loader is not None:
            return self._loader.stats(server=False)["loader"]["wait_fraction"]
        now = time.perf_counter()
        share = min(1.0, self._wait / max(now - self._since, 1e-9))
        self._wait, self._since = 0.0, now
        return share


def train_epoch(batches, model, opt, loss_fn, device, num_classes, mean, std, max_steps=0,
                on_batch=None, after_step=None, input_bound=None, log_every=0, epoch=0):
    """One pass over `batches`: (steps, images, loss sum, seconds waiting for data,
    elapsed seconds). `on_batch()` is called before each batch is used,
    `after_step(steps)` after each step. Every `log_every` steps it prints the
    loss and how input-bound the loop was (`input_bound`: an InputBound)."""
    images_seen, steps, wait, loss_sum = 0, 0, 0.0, 0.0
    start = t_wait = time.perf_counter()
    for images, labels in batches:
        waited = time.perf_counter() - t_wait
        wait += waited
        if input_bound is not None:
            input_bound.waited(waited)
        if on_batch is not None:
            on_batch()
        x, labels = model_input(images, labels, device, num_classes, mean, std)
        del images  # a batchcast batch's lease ends with its last tensor
        loss = sgd_step(model, opt, loss_fn, x, labels)
        loss_sum += loss
        images_seen += labels.shape[0]
        steps += 1
        if input_bound is not None and log_every and steps % log_every == 0:
            print(f"epoch {epoch} step {steps}: loss {loss:.3f}, "
                  f"input-bound {100 * input_bound.take():.0f}%", flush=True)
        if after_step is not None:
            after_step(steps)
        t_wait = time.perf_counter()
        if max_steps and steps >= max_steps:
            break
    return steps, images_seen, loss_sum, wait, time.perf_counter() - start


def make_batches(args):
    """(iterable of (images, labels) per epoch, number of classes, cleanup)."""
    if args.data:
        import torchvision
        import torchvision.transforms as T

        tf = T.Compose([T.RandomResizedCrop(args.size), T.RandomHorizontalFlip(), T.ToTensor(),
                        T.Normalize(MEAN.flatten().tolist(), STD.flatten().tolist())])
        ds = torchvision.datasets.ImageFolder(args.data, transform=tf)
        loader = torch.utils.data.DataLoader(
            ds, batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
            drop_last=True, pin_memory=args.device.startswith("cuda"),
            persistent_workers=args.workers > 0)
        return loader, len(ds.classes), lambda: None

    batchcast = import_batchcast()
    server = None
    name = args.shared
    if args.synthetic:
        name = f"train-resnet-demo-{os.getpid()}"
        server = batchcast.Server(synthetic=args.synthetic, size=args.size, name=name,
                                  batch_size=args.batch_size, window=8)
    loader = batchcast.Loader(name, batch_size=args.batch_size, join=args.join)  # <- the 2 lines

    def cleanup():
        loader.close()
        if server is not None:
            server.close()

    print(f"batchcast: {name}, {loader.fields}, epoch of {loader.epoch_len} samples = "
          f"{len(loader)} batches of {args.batch_size}")
    return loader, 1000, cleanup


def main():
    args = parse_args()
    import torchvision

    device = torch.device(args.device)
    torch.manual_seed(0)
    batches, classes, cleanup = make_batches(args)
    num_classes = args.num_classes or classes
    model = torchvision.models.resnet18(num_classes=num_classes).to(device)
    model = model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    mean, std = MEAN.to(device), STD.to(device)
    print(f"ResNet-18, {num_classes} classes, device {device}, batch {args.batch_size}, "
          f"{torch.get_num_threads()} threads")
    start = (load_checkpoint(args.resume, model, opt, batches, device, args.epochs)
             if args.resume else 0)
    input_bound = InputBound(batches)
    input_bound.take()  # the first interval starts with the training, not at connection
    try:
        for epoch in range(start, args.epochs):
            model.train()

            def after_step(step, epoch=epoch):
                if args.checkpoint and args.checkpoint_every and step % args.checkpoint_every == 0:
                    save_checkpoint(args.checkpoint, model, opt, epoch, batches)

            steps, images_seen, loss_sum, wait, elapsed = train_epoch(
                batches, model, opt, loss_fn, device, num_classes, mean, std, args.steps,
                input_bound=input_bound, log_every=args.log_every, epoch=epoch,
                after_step=after_step)
            if args.checkpoint:
                save_checkpoint(args.checkpoint, model, opt, epoch + 1, batches)
            print(f"epoch {epoch}: {steps} steps, "
                  f"{epoch_figures(images_seen, elapsed, loss_sum / max(steps, 1), wait)}",
                  flush=True)
    finally:
        cleanup()


if __name__ == "__main__":
    main()
