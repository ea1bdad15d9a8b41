#!/usr/bin/env python3
"""DistributedDataParallel ResNet training whose ranks read one batchcast server per node.

Each node runs one server (decoding every image once) on its shard of the
dataset; the node's ranks form one *consumer group* that splits the
server's stream like DistributedSampler: per epoch each rank gets its own
batches, all ranks the same number of them, and the ranks of all nodes
together see every sample once. Nothing here passes a rank to batchcast:
the Loader takes its group and rank from torchrun's or SLURM's variables
(LOCAL_RANK/LOCAL_WORLD_SIZE, SLURM_LOCALID/SLURM_NTASKS_PER_NODE) and the
server its shard from the node rank (shard_from_env: GROUP_RANK/NNODES,
SLURM_NODEID/SLURM_NNODES).

Usage:

  # One node, 2 GPUs: local rank 0 starts the node's server in its process
  # (--data DIR, or --synthetic N for a demo without a dataset):
  torchrun --standalone --nproc_per_node 2 examples/train_ddp.py \\
      --data /data/imagenet/train --device cuda --size 224 --batch-size 64

  # The same on CPU (gloo), tiny and fast (what the CI test runs):
  torchrun --standalone --nproc_per_node 2 examples/train_ddp.py \\
      --synthetic 256 --size 32 --batch-size 8 --epochs 2 --check-split

  # Without MPS each rank other than local rank 0 decodes its own GPU's ring
  # of the node's server in its own process (--produce, the default then),
  # so that the GPU does not time-slice the decode with the rank. Or every
  # rank hosts a server of its own on its GPU, for its shard of the dataset
  # (shard RANK of WORLD_SIZE; the job's ranks then share no stream with
  # another job):
  torchrun --standalone --nproc_per_node 4 examples/train_ddp.py \\
      --data /data/imagenet/train --device cuda --size 224 --server-per-rank

  # Several nodes (the same on each; local rank 0 serves its node's shard):
  torchrun --nnodes 2 --nproc_per_node 8 --rdzv_backend c10d --rdzv_endpoint HOST:29500 \\
      examples/train_ddp.py --data /data/imagenet/train --device cuda

  # Checkpoints (rank 0 saves the model and the loader's place, its group's)
  # and an exact resume when torchrun restarts the job (--max-restarts) or
  # you run it again: every rank goes on at the saved round.
  torchrun --standalone --nproc_per_node 2 --max-restarts 3 examples/train_ddp.py \\
      --data /data/imagenet/train --device cuda --checkpoint ckpt.pt --checkpoint-every 200 \\
      --resume-if-present

  # SLURM, a server step of its own per node (see README, "DDP"):
  #   srun --overlap --ntasks-per-node 1 batchcast-server serve DATA --name imnet \\
  #       --shard-from-env ... &
  srun --ntasks-per-node 8 --gpus-per-node 8 python3 examples/train_ddp.py --shared imnet \\
      --device cuda                        # MASTER_ADDR / MASTER_PORT set before srun

Options: --device cpu|cuda (cuda: each rank on GPU LOCAL_RANK, backend nccl;
cpu: gloo), --epochs E, --steps N (stop each epoch after N steps; 0 = whole
epochs), --batch-size B (per rank), --size S, --arch (a torchvision ResNet),
--server-device (the in-process server's rings: cuda:all, a ring per GPU sharing one
stream, by default on a node of several GPUs with --device cuda; else cpu; or cuda:N),
--server-per-rank (a server in every rank's process, on its GPU, for shard RANK of
WORLD_SIZE; its checkpoint holds every rank's place), --produce / --no-produce (each
rank decodes its GPU's ring of the node's server; default: when the rings are on
several GPUs and MPS is off).
--check-split gathers every rank's sample indices at each epoch's end and
checks that no sample was read twice (rank 0 prints the result; with
--split-log FILE it also appends them to FILE, a JSON line per epoch, so that
the epochs of a job stopped and resumed can be compared with a whole one).
--checkpoint PATH (rank 0 saves after every epoch and every --checkpoint-every
N steps), --resume PATH (every rank continues from it; --resume-if-present:
from --checkpoint when it exists, for torchrun's restarts).

Every rank prints one line per epoch (batches, images/s, time waiting for
data); rank 0 also prints the job's aggregate images/s.
"""
import argparse
import datetime
import gc
import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

# The single-process example's helpers (examples/ is this script's sys.path[0]).
from train_resnet import (MEAN, STD, add_checkpoint_args, epoch_figures, import_batchcast,
                          load_checkpoint, save_checkpoint, train_epoch)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="See the top of this file for usage examples.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", metavar="DIR",
                     help="image folder: local rank 0 serves this node's shard of it")
    src.add_argument("--synthetic", metavar="N", type=int,
                     help="demo: local rank 0 serves N synthetic images (this node's shard)")
    src.add_argument("--shared", metavar="NAME",
                     help="a server already running on each node (--shard-from-env)")
    p.add_argument("--device", default="cpu", help="cpu (gloo) or cuda (nccl, GPU LOCAL_RANK)")
    p.add_argument("--server-per-rank", action="store_true",
                   help="every rank hosts a server of its own, on its own GPU, for its shard "
                        "of the dataset (rank of world size): the decode runs in the trainer's "
                        "process, so that GPUs without MPS do not time-slice it with a server "
                        "process; the job's ranks then read no shared stream")
    p.add_argument("--server-device", default=None,
                   help="rings of the in-process server: cuda:all (a ring per GPU, the default "
                        "with --device cuda on several GPUs), cpu (host memory, else) or cuda:N")
    p.add_argument("--produce", action=argparse.BooleanOptionalAction, default=None,
                   help="each rank decodes its own GPU's ring of the node's server in its own "
                        "process (batchcast.Loader(..., produce=True)): the decode of GPU r "
                        "then runs in rank r's CUDA context, which the GPU does not time-slice "
                        "against the rank when MPS is off (default: so when the server has a "
                        "ring on each of several GPUs and MPS is off; --no-produce: the "
                        "server decodes every ring)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--steps", type=int, default=0, help="steps per epoch (0 = whole epochs)")
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--size", type=int, default=64, help="image size (--data, --synthetic)")
    p.add_argument("--arch", default="resnet18", help="torchvision model (resnet18, resnet50)")
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--check-split", action="store_true",
                   help="check that the ranks read disjoint samples (gathers indices)")
    p.add_argument("--split-log", default=None, metavar="FILE",
                   help="with --check-split: rank 0 appends each epoch's indices (every "
                        "rank's) to FILE as a JSON line")
    add_checkpoint_args(p)
    p.add_argument("--resume-if-present", action="store_true",
                   help="resume from --checkpoint when it exists (a job torchrun restarts)")
    args = p.parse_args()
    if args.split_log and not args.check_split:
        p.error("--split-log needs --check-split")
    if args.server_per_rank and args.shared:
        p.error("--server-per-rank starts the servers: not with --shared")
    if args.server_per_rank and args.produce:
        p.error("--produce: with --server-per-rank each rank decodes in its own process already")
    if args.server_per_rank:
        args.produce = False
    return args


def place():
    """(rank, world size, local rank, job id) from torchrun's or SLURM's variables."""
    env = os.environ
    if "LOCAL_RANK" in env:  # torchrun
        run = env.get("TORCHELASTIC_RUN_ID", "")
        if run in ("", "none"):
            run = env.get("MASTER_PORT", "0")
        return int(env["RANK"]), int(env["WORLD_SIZE"]), int(env["LOCAL_RANK"]), run
    if "SLURM_PROCID" in env:  # srun: one task per GPU
        return (int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"]), int(env["SLURM_LOCALID"]),
                f"{env['SLURM_JOB_ID']}.{env.get('SLURM_STEP_ID', 0)}")
    return 0, 1, 0, str(os.getpid())


def server_device_default(device):
    """cuda:all (a ring per local GPU) for a GPU job on a node of several GPUs, else cpu."""
    if device.startswith("cuda") and torch.cuda.is_available() and torch.cuda.device_count() > 1:
        return "cuda:all"
    return "cpu"


def produce_by_default(rings, mps):
    """Whether a rank decodes its GPU's ring when neither --produce nor
    --no-produce is given: when the server's rings (its stats' `device`) are
    on several GPUs and MPS is off (its stats' `mps`), where the server's
    decode on GPU r would time-slice with rank r."""
    return rings.startswith("cuda") and "," in rings and mps is False


def open_rank_loader(batchcast, args, name, rank, hosts_server):
    """This rank's Loader of server `name`, decoding its GPU's ring with
    --produce, or by default where produce_by_default says so; a rank whose
    process hosts the node's server (`hosts_server`) decodes its ring there
    already. A default that the server refuses (tar shards, which the
    server alone reads; a ring another rank on this GPU decodes already; a
    server with --no-attach) leaves the decode to the server, with a line."""
    produce = args.produce
    if produce is None:
        stats = batchcast.query_stats(name)
        produce = produce_by_default(str(stats.get("device")), stats.get("mps"))

    def open_loader(produce):
        return batchcast.Loader(name, batch_size=args.batch_size, join="next_epoch",
                                group=False if args.server_per_rank else None, produce=produce)
    try:
        return open_loader(produce and not hosts_server)
    except (batchcast.InvalidArgument, batchcast.ResourceExhausted, batchcast.NotFound) as e:
        if args.produce is not None or not produce:
            raise
        print(f"[rank {rank}] the server decodes this rank's ring: {e}", flush=True)
        return open_loader(False)


def mps_advice(rings, mps, ranks_decode):
    """What to do instead of a ring per GPU in this process when MPS is off
    (each other rank's GPU then time-slices its decode with the rank), or
    None; also None when the ranks decode in their own processes already
    (`ranks_decode`: --server-per-rank or --produce)."""
    if ranks_decode or mps != "off" or "," not in rings:
        return None
    return ("MPS is off, so each rank's GPU time-slices this process's decode with the rank: "
            "--produce (each rank decodes its own GPU's ring), --server-per-rank, or "
            "--server-device cuda:0 where GPU 0 can decode for every rank, fed the ranks faster "
            "(README, \"DDP: torchrun and SLURM\")")


def server_name(args, job, rank):
    """The server this rank reads: the node's, or with --server-per-rank its own."""
    if args.shared:
        return args.shared
    return (f"ddp-{job}-r{rank}" if args.server_per_rank else f"ddp-{job}")[:64]


def start_server(args, batchcast, job, rank, world, local_rank):
    """Local rank 0's server for this node's shard (shard_from_env), or with
    --server-per-rank this rank's server for shard `rank` of `world`, on its
    own GPU; None with --shared."""
    if args.shared:
        return None
    source = dict(synthetic=args.synthetic) if args.synthetic else dict(data=args.data)
    if args.server_per_rank:
        device = (f"cuda:{local_rank % torch.cuda.device_count()}"
                  if args.device.startswith("cuda") else "cpu")
        return batchcast.Server(**source, name=server_name(args, job, rank),
                                device=args.server_device or device, size=args.size,
                                batch_size=args.batch_size, shard_rank=rank, num_shards=world)
    local_ranks = int(
        os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("SLURM_NTASKS_PER_NODE", 1)))
    device = args.server_device or server_device_default(args.device)
    # A ring per GPU sharing one stream: a producer batch per rank batch, so
    # that each batch is decoded on the GPU of the rank that reads it (the
    # server's default window gives each ring 4 slots: a rank holds a batch
    # or two while its GPU works on them, and each ring's producer writes
    # ahead). One ring: a producer batch per round of the node's ranks.
    several = "," in device or device == "cuda:all"
    batch_size = args.batch_size * (1 if several else local_ranks)
    return batchcast.Server(**source, name=server_name(args, job, rank), device=device,
                            size=args.size, batch_size=batch_size,
                            shard_from_env=True)


class RankLoaders:
    """With --server-per-rank, each rank's place in its own server's stream:
    saved together in rank 0's checkpoint, each rank loading its own."""

    def __init__(self, loader, rank, world):
        self.loader, self.rank, self.world = loader, rank, world
        self.states = None

    def gather(self):
        """Every rank's loader state (a collective: every rank calls it)."""
        self.states = [None] * self.world
        dist.all_gather_object(self.states, self.loader.state_dict())
        return self

    def state_dict(self):
        return {"epoch": self.states[0]["epoch"], "step": self.states[0]["step"],
                "ranks": self.states}

    def load_state_dict(self, state):
        ranks = state.get("ranks")
        if not isinstance(ranks, list) or len(ranks) != self.world:
            raise ValueError(
                "the checkpoint does not hold a loader state per rank for "
                f"{self.world} ranks (saved with --server-per-rank by a job of as many ranks?)")
        self.loader.load_state_dict(ranks[self.rank])


def main():
    args = parse_args()
    rank, world, local_rank, job = place()
    batchcast = import_batchcast()
    batchcast.set_log_level("warn")
    # The node's server, before this process's other CUDA work: a GPU server
    # then starts CUDA with hardware queues of its own (README, "PyTorch, one
    # job"; Note [Hardware queues]).
    server = (start_server(args, batchcast, job, rank, world, local_rank)
              if local_rank == 0 or args.server_per_rank else None)
    cuda = args.device.startswith("cuda")
    if cuda:
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(1, world)))
    dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(minutes=5))
    dist.barrier()  # every node's server is up before any rank connects
    # The group and the rank come from the launcher (torchrun or SLURM); with
    # a server per rank, its own server's stream has no group to split it.
    # --produce: a rank whose process hosts the node's server decodes its
    # ring there already.
    loader = open_rank_loader(batchcast, args, server_name(args, job, rank), rank,
                              hosts_server=server is not None)
    where = "in this rank's shard" if args.server_per_rank else "on this node"
    print(f"[rank {rank}] {loader!r}: {len(loader)} batches per epoch of {loader.epoch_len} "
          f"samples {where}, device {device}", flush=True)
    if loader.producing:
        print(f"[rank {rank}] decodes the node server's ring on {loader.ring_device} in this "
              f"process", flush=True)
    if server is not None:
        # Whether MPS serves the node's GPUs decides what a ring per GPU costs
        # the ranks (README, "DDP").
        stats = server.stats()
        mps = {True: "on", False: "off"}.get(stats.get("mps"), stats.get("mps", "n/a"))
        whose = "its own server" if args.server_per_rank else "the node's server"
        print(f"[rank {rank}] {whose}: rings {stats.get('device')}, MPS {mps}", flush=True)
        advice = mps_advice(str(stats.get("device")), mps, args.produce is not False)
        if advice:
            print(f"[rank {rank}] {advice}", flush=True)

    import torchvision

    torch.manual_seed(0)
    model = getattr(torchvision.models, args.arch)(num_classes=args.num_classes).to(device)
    model = model.to(memory_format=torch.channels_last)
    model = DDP(model, device_ids=[device.index] if cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    mean, std = MEAN.to(device), STD.to(device)
    resume = args.resume
    if args.resume_if_present and args.checkpoint and os.path.exists(args.checkpoint):
        resume = args.checkpoint
    # Every rank loads rank 0's checkpoint: its loader state is the group's place.
    start = (load_checkpoint(resume, model.module, opt,
                             RankLoaders(loader, rank, world) if args.server_per_rank else loader,
                             device, args.epochs)
             if resume else 0)

    def checkpoint(epoch, step=None):
        if not args.checkpoint or not (
                step is None or (args.checkpoint_every and step % args.checkpoint_every == 0)):
            return
        # A server per rank: every rank's place (gathered on every rank), else
        # the group's, which each rank's loader gives.
        saved = RankLoaders(loader, rank, world).gather() if args.server_per_rank else loader
        if rank == 0:
            save_checkpoint(args.checkpoint, model.module, opt, epoch, saved)

    try:
        for epoch in range(start, args.epochs):
            model.train()
            seen = []
            # Every rank gets the same number of batches; join() still covers
            # epochs shortened by files the servers could not decode.
            with model.join():
                steps, images_seen, loss_sum, wait, elapsed = train_epoch(
                    loader, model, opt, loss_fn, device, args.num_classes, mean, std, args.steps,
                    on_batch=(lambda: seen.append(loader.indices.clone())) if args.check_split
                    else None, after_step=lambda step, epoch=epoch: checkpoint(epoch, step))
            checkpoint(epoch + 1)
            print(f"[rank {rank}] epoch {epoch}: {steps} batches, "
                  f"{epoch_figures(images_seen, elapsed, loss_sum / max(steps, 1), wait)}",
                  flush=True)
            report(epoch, steps, images_seen, elapsed, seen, args, rank, world, device)
    finally:
        loader.close()
        # Note: the model goes before the process group. DDP's reducer holds
        # the group; left to the end of the interpreter, it was the group's
        # last holder, and gloo's destructor (torch 1.13) then waited for a
        # worker thread that waited for the GIL: rank 1 hung at exit, spinning.
        model = opt = None  # (a checkpoint closure holds their names)
        gc.collect()
        dist.barrier()  # the other ranks are done with this node's server
        if server is not None:
            server.close()
        dist.destroy_process_group()


def report(epoch, steps, images, elapsed, seen, args, rank, world, device):
    """Rank 0 prints the job's figures for the epoch (and the split check)."""
    # (nccl reduces tensors on the rank's GPU, gloo on the CPU)
    most = torch.tensor([steps, elapsed], dtype=torch.float64, device=device)
    least = torch.tensor([steps], dtype=torch.float64, device=device)
    total = torch.tensor([images], dtype=torch.float64, device=device)
    dist.all_reduce(most, op=dist.ReduceOp.MAX)  # most batches, the slowest rank's time
    dist.all_reduce(least, op=dist.ReduceOp.MIN)
    dist.all_reduce(total)
    if rank == 0:
        n, seconds = int(total.item()), most[1].item()
        print(f"epoch {epoch}: {world} ranks, {int(least.item())}..{int(most[0].item())} batches "
              f"per rank, {n} images in {seconds:.2f} s = {n / max(seconds, 1e-9):.1f} images/s "
              f"in all", flush=True)
    if args.check_split:
        gathered = [None] * world
        mine = torch.cat(seen).tolist() if seen else []
        dist.all_gather_object(gathered, mine)
        if rank == 0:
            every = [i for part in gathered for i in part]
            verdict = "ok" if len(set(every)) == len(every) else "DUPLICATES"
            print(f"epoch {epoch}: split {verdict}: {len(every)} samples read, "
                  f"{len(set(every))} distinct", flush=True)
            if args.split_log:
                with open(args.split_log, "a") as f:
                    f.write(json.dumps({"epoch": epoch, "indices": every}) + "\n")


if __name__ == "__main__":
    main()
