#!/usr/bin/env python3
"""One server with a ring per GPU (one stream, each sample decoded once), against one GPU.

    benchmarks/multi_gpu.py [--build DIR] [--data DIR] [--gpus 1,2,4] [--seconds S]
                            [--warmup S] [--images N] [--quick] [--repeat N]
                            [--skip producer,trainers,ddp] [--separate]
                            [--placements round-robin,demand] [--trainer-queues 8,32]
                            [--server-option KEY=VALUE ...] [--json FILE]

In one run, on the same dataset (--images JPEGs, default 20,000, made by
tools/make_dataset.py once under /tmp and read into the page cache):

1. producer: for each GPU count g (default 1, 2 and 4, as visible), starts
   `batchcast-server serve DATA --device cuda:0,..,g-1 --decode gpu` (train
   transform, 224, float16, NCHW, producer batch 256, the default window: 8,
   or 4 per GPU beyond 2 GPUs) with one
   batchcast.Loader per GPU (device=cuda:i, batch 256, a process each) reading as
   fast as it can; after --warmup seconds it measures over --seconds the
   server's aggregate rate (samples published: each decoded once) and what
   each GPU decoded (`rings[i].samples_decoded`), per second and per epoch,
   the bytes copied between GPUs, and each ring's producer stages (share of
   the interval, docs/stats.md `producer_stage_s`), naming the rings that
   paced the others (`paced_by`: far longer in their decode calls, while
   the rings take the stream's batches in turn, placement=round-robin; none
   by demand, the default, where the shares follow the rings' speeds, and
   `given_less` names the rings the plan gave under 3/4 of an equal share).
   --server-option (e.g. read_threads=1, nvjpeg_calls=2,
   placement=round-robin) adds a `serve` option to these servers
   and the trainers' (not to train_ddp.py's). --repeat N runs this part N
   rounds (each GPU count in turn; each ratio to its round's one-GPU rate)
   and prints the range: rates of one machine differ between runs by a third.
   --placements round-robin,demand runs each count of 2 or more GPUs once
   per placement, in turn within each round, so that both compare in one run
   (the one-GPU rate, the same for both, once per round).
   --separate adds, after each count g of 2 or more, g single-GPU servers at
   once (`--device cuda:i`, one reader each, every server decoding the whole
   stream for its reader): their rates against the one-GPU rate of the same
   round show whether one process holding g rings slows its rings' decode
   threads, or g decodes on one node slow each other anyway.
   --grouped adds, after each count g of 2 or more, the same server with its
   g readers one group (as a DDP job's ranks: each rank fed from its own
   GPU's ring): the same decode with no copies between GPUs, where each
   reader of the whole stream copies the batches of the g - 1 other rings.
2. trainers: on the most GPUs, one trainer process per GPU, all at once (ResNet-50 batch 128
   bfloat16, then ResNet-18), fed by the g-GPU server (a batchcast.Loader on
   its GPU, each reading the whole stream) vs synthetic tensors already on
   its GPU, also all at once: images/s per trainer over --seconds, in one
   window that begins for all together once each has warmed up (--warmup,
   at least 5 s) and that none leaves before every trainer's window has
   ended (one that left would change what the others read and decode),
   and the fed/synthetic ratio; then the
   same trainers each decoding its GPU's ring in its own process
   (Loader(produce=True): an attached producer, the decode in the trainer's
   CUDA context), against the same synthetic rates; the share of the
   time each trainer waited for data, and each ring's share of the decode
   while the trainers decoded. The synthetic trainers run before each
   round and after the last, and a round's ratios are to the mean of the
   references around it (a machine's rates drift within minutes).
   --archs picks the models; --placements round-robin,demand runs the fed
   and decoding trainers once per placement in every round, --repeat N
   rounds, and prints each model's and placement's range of ratios over
   the rounds (`trainers_summary` in the JSON). --trainer-queues 8,32 runs
   them once per number of CUDA hardware queues in the trainers' processes
   (CUDA_DEVICE_MAX_CONNECTIONS, which the decode in a trainer's context
   shares with its training kernels; Note [Hardware queues]), the
   synthetic reference with the environment's.
3. ddp: for each g of 2 or more, examples/train_ddp.py under torchrun over g
   GPUs (one rank per GPU, batch 128; ResNet-50 on 2 GPUs, ResNet-18 on more),
   with the server's rings on every GPU (--server-device cuda:all), the same
   with each rank decoding its own GPU's ring (--produce), one cuda:0 ring,
   and a server in every rank's process (--server-per-rank): the
   job's images/s over every epoch but the first, a warm-up (6 epochs;
   --quick 3): an epoch of the 20,000 images lasts 1-4 s.

Needs torch with CUDA, nvJPEG in the build and a CUDA build of batchcast.
About 10 minutes in all on 4 GPUs, more with --repeat (it repeats the producer and
trainers parts); --quick (shorter measurements) about 6.
"""
import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_files import default_dataset, make_dataset, warm_page_cache  # noqa: E402
from bench_server import ServerProcess, find_build, server_bin  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVER = {"decode": "gpu", "batch_size": 256, "dtype": "float16", "layout": "nchw",
          "transform": "train", "size": 224}


# CUDA's hardware queues per process, read when the process starts CUDA
# (Note [Hardware queues], cuda/include/batchcast/cuda/hardware_queues.h).
QUEUES_ENV = "CUDA_DEVICE_MAX_CONNECTIONS"


def devices(g):
    return "cuda:" + ",".join(str(i) for i in range(g))


def ring_counts(stats, key):
    return [r.get(key, 0) for r in stats.get("rings", [])]


def ring_deltas(before, after, key):
    """Each ring's growth in counter `key` from stats `before` to `after`."""
    return [b - a for a, b in zip(ring_counts(before, key), ring_counts(after, key))]


def percents(shares):
    """Shares of 1 as printed: "12%, 9%"."""
    return ", ".join(f"{x:.0%}" for x in shares)


# A reader of the whole stream; with a rank and a world size after the
# batch, a rank of one group (as a DDP job's: the group's split).
READER = r"""
import sys, torch, batchcast
name, device, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
group = ({"group": "readers", "rank": int(sys.argv[4]), "world_size": int(sys.argv[5])}
         if len(sys.argv) > 5 else {})
torch.cuda.set_device(device)
loader = batchcast.Loader(name, batch_size=batch, timeout=120, device=device, **group)
while True:
    for images, _ in loader:
        pass
"""


def start_processes(g, script, argv, env=None):
    """One process per GPU i running `script` with argv(i) (the build's
    batchcast on its PYTHONPATH: find_build put it there), in this
    process's environment with `env`'s variables set."""
    environ = {**os.environ, **(env or {})}
    return [subprocess.Popen([sys.executable, "-c", script, *argv(i)], env=environ,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for i in range(g)]


def wait_for_consumers(server, n, procs, timeout=120.0):
    """Until the server counts `n` consumers; RuntimeError if a process ends first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in procs:
            if proc.poll() is not None:
                raise RuntimeError(f"a reader exited {proc.returncode}: "
                                   f"{proc.communicate()[0][-2000:]}")
        if len(server.stats().get("consumers", [])) >= n:
            return
        time.sleep(0.2)
    raise RuntimeError(f"{n} readers did not connect in {timeout:.0f} s")


def measure(servers, readers, args):
    """Once every server counts its share of the `readers` (as many each), a
    --warmup, then each server's stats at both ends of --seconds: (the
    interval in seconds, the stats before, the stats after). The readers are
    killed in the end, also when one failed."""
    try:
        for server in servers:
            wait_for_consumers(server, len(readers) // len(servers), readers)
        time.sleep(args.warmup)
        t0, before = time.monotonic(), [server.stats() for server in servers]
        time.sleep(args.seconds)
        t1, after = time.monotonic(), [server.stats() for server in servers]
    finally:
        for proc in readers:
            proc.kill()
            proc.wait()
    return t1 - t0, before, after


def producer(binary, args, g, placement=None, grouped=False):
    """The server over g GPUs with a reader on each: each reading the whole
    stream, or (`grouped`) the g readers one group, each rank fed from its
    own GPU's ring (no copies between GPUs)."""
    name = f"mgbench-{os.getpid()}-p{g}" + ("-grouped" if grouped else "")
    # The server's default window: 4 slots per ring (each reader holds a slot
    # or two while it reads, and each ring's producer writes ahead).
    options = dict(SERVER, device=devices(g))
    if placement:
        options["placement"] = placement
    with ServerProcess(binary, name, options, data=args.data, timeout=120) as server:
        ranks = (lambda i: [str(i), str(g)]) if grouped else (lambda i: [])
        readers = start_processes(g, READER, lambda i: [name, f"cuda:{i}", "256", *ranks(i)])
        dt, (s0,), (s1,) = measure([server], readers, args)
    decoded = [d / dt for d in ring_deltas(s0, s1, "samples_decoded")]
    epoch = s1.get("epoch_len", 1)
    return {"gpus": g, "server_options": options, "placement": s1["placement"],
            "rate": (s1["samples_published"] - s0["samples_published"]) / dt,
            "decoded_per_ring": decoded,
            "epoch_share_per_ring": [d / max(sum(decoded), 1e-9) for d in decoded],
            "epoch_len": epoch,
            "peer_bytes_per_s": [d / dt for d in ring_deltas(s0, s1, "peer_bytes")],
            "stage_share_per_ring": [stage_shares(a, b, dt) for a, b in
                                     zip(s0.get("rings", []), s1.get("rings", []))],
            "turn_wait_share_per_ring": turn_wait_shares(s0, s1, dt),
            "read_ahead_miss_share_per_ring": read_ahead_miss_shares(s0, s1),
            "slot_wait_share": (s1.get("producer_blocked_s", 0.0)
                                - s0.get("producer_blocked_s", 0.0)) / dt,
            "mps": mps_state(s1)}


def mps_state(stats):
    """Whether the server ran under MPS, from its stats (docs/stats.md mps):
    "on", "off" or "unknown"."""
    return {True: "on", False: "off"}.get(stats.get("mps"), "unknown")


def turn_wait_shares(before, after, dt):
    """Each ring's share of the interval its producer waited for its turn
    (docs/stats.md turn_wait_s): the stream's next batch was another ring's,
    not begun yet."""
    return [d / dt for d in ring_deltas(before, after, "turn_wait_s")]


def read_ahead_miss_shares(before, after):
    """Each ring's share of the batches it wrote in the interval whose files
    it had not read ahead (docs/stats.md read_ahead_misses)."""
    return [m / w if w else 0.0 for m, w in zip(ring_deltas(before, after, "read_ahead_misses"),
                                                ring_deltas(before, after, "batches_written"))]


def stage_shares(before, after, dt):
    """Each producer stage's share of the interval on one ring (docs/stats.md
    producer_stage_s; a stage on a pool is summed over its threads)."""
    b, a = before.get("producer_stage_s", {}), after.get("producer_stage_s", {})
    return {k: round((a[k] - b.get(k, 0.0)) / dt, 3) for k in sorted(a)}


def separate(binary, args, g):
    """g single-GPU servers at once, one per GPU (`--device cuda:i`), each
    with one reader on its GPU: every server decodes the whole stream for
    its reader. Their rates, against the node server's, tell what one
    process holding g rings costs its rings' decode threads."""
    name = f"mgbench-{os.getpid()}-s{g}"
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(ServerProcess(
            binary, f"{name}-{i}", dict(SERVER, device=f"cuda:{i}"), data=args.data,
            timeout=120)) for i in range(g)]
        readers = start_processes(g, READER, lambda i: [f"{name}-{i}", f"cuda:{i}", "256"])
        dt, s0, s1 = measure(servers, readers, args)
    rates = [(b["samples_published"] - a["samples_published"]) / dt for a, b in zip(s0, s1)]
    return {"rate": sum(rates), "rate_per_server": rates,
            "stage_share_per_server": [stage_shares(a["rings"][0], b["rings"][0], dt)
                                       if a.get("rings") and b.get("rings") else {}
                                       for a, b in zip(s0, s1)]}


def given_less(epoch_share_per_ring, below=0.75):
    """By demand, the rings that the plan gave less than `below` of an equal
    share of the epoch: slower rings (the plan's shares follow the rings'
    speeds). [] with one ring."""
    g = len(epoch_share_per_ring)
    return [i for i, s in enumerate(epoch_share_per_ring) if g > 1 and s < below / g]


def slowed_in_decode(rates, stage_shares, one, below=0.5, busy=0.9):
    """The servers of a --separate run that decoded less than `below` of one
    GPU's rate (`one`, this round's) while their thread was in nvJPEG's calls
    at least `busy` of the interval: the hardware decode in that process ran
    slow, not its reads or its reader. [] without a one-GPU rate."""
    if not one:
        return []
    return [i for i, (rate, shares) in enumerate(zip(rates, stage_shares))
            if rate < below * one and shares.get("hw_decode", 0.0) >= busy]


def paced_by(stage_share_per_ring, stage="hw_decode", near=0.1, gap=0.2):
    """The rings that paced the others in a producer round: those within
    `near` of the largest share of `stage` (each ring's one thread in nvJPEG's
    calls), when every other ring's share is at least `gap` below it. The
    rings take the stream's batches in turn, so a ring slower in its decode
    calls makes every ring go at its pace. [] with one ring, or when the
    rings' shares lie close together."""
    shares = [r.get(stage, 0.0) for r in stage_share_per_ring]
    if len(shares) < 2:
        return []
    top = max(shares)
    slow = [i for i, v in enumerate(shares) if v >= top - near]
    rest = [v for i, v in enumerate(shares) if i not in slow]
    return slow if rest and max(rest) <= top - gap else []


TRAINER = r"""
import os, sys, time, torch, torchvision
device, arch, batch, warmup, seconds, source, produce, sync = sys.argv[1:9]
batch, warmup, seconds = int(batch), float(warmup), float(seconds)
i = int(device.split(":")[1])
torch.cuda.set_device(i)
model = getattr(torchvision.models, arch)().cuda(i).to(memory_format=torch.channels_last)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loader = None
if source == "synthetic":
    x = torch.randn(batch, 3, 224, 224, device=device, dtype=torch.float16)
    batches = iter(lambda: x, None)
else:
    import batchcast
    loader = batchcast.Loader(source, batch_size=batch, timeout=120, device=device,
                              produce=produce == "produce")
    def endless():
        while True:
            for images, _ in loader:
                yield images
    batches = endless()
# A warm-up, READY, then whole steps for `seconds` from when SYNC/go appears
# (the GPU drained at both ends), then on until SYNC/stop: every trainer
# trains through every other's window (trainers_at_once).
go, stop = os.path.join(sync, "go"), os.path.join(sync, "stop")
start, t0, state = time.monotonic(), None, "warm-up"
for n, x in enumerate(batches):
    now = time.monotonic()
    if state == "warm-up" and now - start >= warmup:
        print("READY", flush=True)
        state = "ready"
    elif state == "ready" and os.path.exists(go):
        torch.cuda.synchronize(i)
        t0, n0, state = time.monotonic(), n, "measuring"
        w0 = loader.wait_s if loader is not None else 0.0
    elif state == "measuring" and now - t0 >= seconds:
        torch.cuda.synchronize(i)
        elapsed = time.monotonic() - t0
        print("RATE", batch * (n - n0) / elapsed, flush=True)
        # The share of the window it waited for data (the rest: its GPU work).
        print("WAIT", ((loader.wait_s - w0) / elapsed) if loader is not None else 0.0, flush=True)
        state = "measured"
    elif state == "measured" and os.path.exists(stop):
        break
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x.to(memory_format=torch.channels_last)).float().mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
"""


def run_in_step(procs, sync, timeout):
    """Drives processes that follow TRAINER's protocol: once each printed
    READY, creates `sync`/go (their windows begin together); once each
    printed its WAIT line, `sync`/stop (none leaves while another measures:
    a trainer that left would change what the others read and decode). The
    output of each; RuntimeError when one ends early or `timeout` passes."""
    outs = [[] for _ in procs]

    def collect(proc, lines):
        for line in proc.stdout:
            lines.append(line)
    readers = [threading.Thread(target=collect, args=(p, o), daemon=True)
               for p, o in zip(procs, outs)]
    for t in readers:
        t.start()

    def until(word, what):
        def said(i):  # a copy: the reader thread may append meanwhile
            return any(line.startswith(word) for line in list(outs[i]))
        deadline = time.monotonic() + timeout
        while not all(said(i) for i in range(len(procs))):
            for i, proc in enumerate(procs):
                if proc.poll() is not None and not said(i):
                    readers[i].join(5)
                    raise RuntimeError(f"process {i} exited {proc.returncode} before {what}: "
                                       f"{''.join(outs[i])[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no {what} from every process in {timeout:.0f} s")
            time.sleep(0.05)
        open(os.path.join(sync, what), "w").close()

    until("READY", "go")
    until("WAIT", "stop")
    for proc, t in zip(procs, readers):
        proc.wait(timeout=timeout)
        t.join(timeout)
    return ["".join(o) for o in outs]


def trainers_at_once(args, g, arch, batch, source, produce=False, queues=None):
    """img/s of one trainer process per GPU, all at once, reading `source`
    (a server's name, or "synthetic": a tensor already on its GPU); with
    `produce`, each decodes its GPU's ring (Loader(produce=True)); with
    `queues`, each process has that many CUDA hardware queues
    (CUDA_DEVICE_MAX_CONNECTIONS), else the environment's; and the share of
    the time each waited for data. The trainers measure one window, begun
    together after each one's warm-up (run_in_step)."""
    env = {QUEUES_ENV: str(queues)} if queues else None
    with tempfile.TemporaryDirectory(prefix="mgbench-sync-") as sync:
        procs = start_processes(g, TRAINER, lambda i: [
            f"cuda:{i}", arch, str(batch), str(max(args.warmup, 5.0)), str(args.seconds),
            source, "produce" if produce else "read", sync], env=env)
        try:
            outs = run_in_step(procs, sync, timeout=300)
        finally:
            for proc in procs:  # the others, when one failed
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    rates, wait_shares = [], []
    for i, (proc, out) in enumerate(zip(procs, outs)):
        found = re.findall(r"^RATE ([0-9.]+)$", out, re.M)
        if proc.returncode != 0 or not found:
            raise RuntimeError(f"trainer on cuda:{i} ({source}) exited {proc.returncode}: "
                               f"{out[-2000:]}")
        rates.append(float(found[-1]))
        waits = re.findall(r"^WAIT ([0-9.]+)$", out, re.M)
        wait_shares.append(float(waits[-1]) if waits else 0.0)
    return rates, wait_shares


def trainer_rates(binary, args, g, arch, batch, placement=None, queues=None):
    """img/s per GPU of one trainer process per GPU, fed by the g-GPU server
    (placing by `placement`, else its default; each trainer reading its
    ring, then each also decoding it in its own process: `attached`), each
    set of g at once (trainers_at_once), with `queues` CUDA hardware queues
    (else the environment's); with_reference adds the ratios."""
    name = f"mgbench-{os.getpid()}-t{g}-{arch}"
    options = dict(SERVER, device=devices(g))
    if placement:
        options["placement"] = placement
    with ServerProcess(binary, name, options, data=args.data, timeout=120) as server:
        fed, fed_wait = trainers_at_once(args, g, arch, batch, name, queues=queues)
        t0, stats0 = time.monotonic(), server.stats()
        attached, attached_wait = trainers_at_once(args, g, arch, batch, name, produce=True,
                                                   queues=queues)
        t1, after = time.monotonic(), server.stats()
        mps = mps_state(after)
    # Each ring's share of what was decoded while the trainers decoded their
    # rings (warm-ups included): a trainer whose ring took more decodes more.
    decoded = ring_deltas(stats0, after, "samples_decoded")
    shares = [d / sum(decoded) if sum(decoded) else 0.0 for d in decoded]
    return {"gpus": g, "arch": arch, "batch": batch, "server_options": options,
            "placement": options.get("placement", "default"),
            "trainer_queues": queues or "default", "fed": fed, "attached": attached,
            "wait_share": {"fed": fed_wait, "attached": attached_wait},
            "attached_decode_share": shares,
            "attached_turn_wait_share": turn_wait_shares(stats0, after, max(t1 - t0, 1e-9)),
            "mps": mps}


def with_reference(r, before, after):
    """trainer_rates' result `r` against the synthetic rates per GPU measured
    just before and just after its round: the ratios are to their mean
    (`synthetic`; both in `synthetic_runs`). A machine's rates drift within
    minutes (a tenth between runs on one host), so a reference at both ends
    of the round bounds the drift, and their gap shows it."""
    synthetic = [(b + a) / 2 for b, a in zip(before, after)]

    def ratio(rates):
        return [f / s if s else 0.0 for f, s in zip(rates, synthetic)]
    return {**r, "synthetic": synthetic, "synthetic_runs": [before, after],
            "ratio": ratio(r["fed"]), "ratio_attached": ratio(r["attached"])}


def trainers_summary(results):
    """Over the rounds of the trainers part, per model, placement and
    trainers' hardware queues: the range of every trainer's fed/synthetic
    ratio, reading only and decoding its ring (rates of one machine differ
    between rounds: compare ranges)."""
    def setup(r):
        return r["arch"], r["placement"], r["trainer_queues"]
    summary = []
    for arch, placement, queues in dict.fromkeys(setup(r) for r in results):
        mine = [r for r in results if setup(r) == (arch, placement, queues)]
        ranges = {key: [min(x for r in mine for x in r[key]), max(x for r in mine for x in r[key])]
                  for key in ("ratio", "ratio_attached")}
        summary.append({"arch": arch, "placement": placement, "trainer_queues": queues,
                        "rounds": len(mine), **ranges})
    return summary


def queues_text(r):
    """The trainers' hardware queues as the printed lines name them."""
    queues = r["trainer_queues"]
    return "" if queues == "default" else f"{queues} hardware queues, "


def print_trainers(r):
    """One line of trainer_rates' result."""
    print(f"trainers, {r['arch']} batch {r['batch']} bf16, placement {r['placement']}, "
          f"{queues_text(r)}one per GPU on {r['gpus']} GPU(s): "
          + ", ".join(f"cuda:{i} {f:.0f} img/s fed ({q:.2f}), {a:.0f} decoding its ring "
                      f"({qa:.2f}) / {s:.0f} synthetic ({b:.0f} before, {e:.0f} after)"
                      for i, (f, a, s, q, qa, b, e) in enumerate(zip(
                          r["fed"], r["attached"], r["synthetic"], r["ratio"],
                          r["ratio_attached"], *r["synthetic_runs"])))
          + f"; waiting for data: {r['wait_share']}"
          + "; each ring's share of the decode while decoding: "
          + ", ".join(f"{x:.2f}" for x in r["attached_decode_share"])
          + "; each ring waiting for its turn while decoding (warm-up included): "
          + percents(r["attached_turn_wait_share"])
          + f" (MPS: {r['mps']})", flush=True)


def ddp_rate(stdout):
    """The job's images/s over the epochs train_ddp.py reported, but the first
    (a warm-up: the server starts, cuDNN picks its kernels), and their count."""
    epochs = [(int(n), float(s)) for n, s in
              re.findall(r"^epoch \d+: .* (\d+) images in ([0-9.]+) s = ", stdout, re.M)][1:]
    seconds = sum(s for _, s in epochs)
    return (sum(n for n, _ in epochs) / seconds if seconds > 0 else 0.0), len(epochs)


def ddp(args, g, arch, server_device):
    """examples/train_ddp.py under torchrun over g GPUs: its images/s after the first epoch."""
    epochs = 3 if args.quick else 6
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={g}", os.path.join(ROOT, "examples", "train_ddp.py"),
           "--data", args.data, "--device", "cuda", "--size", "224", "--batch-size", "128",
           "--arch", arch, "--epochs", str(epochs),
           *(["--server-per-rank"] if server_device == "per-rank"
             else ["--server-device", "cuda:all", "--produce"] if server_device == "attached"
             else ["--server-device", server_device, "--no-produce"])]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    rate, measured = ddp_rate(out.stdout)
    if out.returncode != 0 or not measured:
        raise RuntimeError(f"train_ddp.py ({server_device}) exited {out.returncode}: "
                           f"{(out.stdout + out.stderr)[-2000:]}")
    mps = re.search(r"(?:the node's|its own) server: rings \S+, MPS (\S+)", out.stdout)
    return {"gpus": g, "arch": arch, "server_device": server_device, "images_per_s": rate,
            "epochs_measured": measured,
            # each rank's last epoch: its images/s and its time waiting for data
            "last_epoch_per_rank": re.findall(r"^\[rank \d+\] epoch \d+: .*$", out.stdout,
                                              re.M)[-g:],
            "mps": mps.group(1) if mps else "unknown"}


def one_gpu_rate(results):
    """A round's one-GPU rate, the reference of its ratios (None without it)."""
    return results[0]["rate"] if results and results[0]["gpus"] == 1 else None


def copied_text(result):
    """Each ring's bytes copied to other GPUs per second, as printed."""
    return ", ".join(f"{b / 1e6:.0f} MB/s" for b in result["peer_bytes_per_s"])


def decode_calls_text(stage_shares):
    """Each ring's (server's) share of the interval in nvJPEG's calls, as printed."""
    return percents(x.get("hw_decode", 0.0) for x in stage_shares)


def producer_round(binary, args, counts, rep):
    """The producer part once over every GPU count (a count of 2 or more once
    per --placements entry, in turn), each ratio to this round's one-GPU rate;
    prints each result and its stages."""
    results = []
    runs = [(g, p) for g in counts for p in (args.placements if g > 1 else [None])]
    for n, (g, placement) in enumerate(runs):
        r = producer(binary, args, g, placement)
        r["round"] = rep
        results.append(r)
        print(f"producer, {g} GPU(s), placement {r['placement']}: {r['rate']:.0f} img/s; "
              "decoded per GPU: "
              + ", ".join(f"{x:.0f}/s ({s:.0%} of each epoch)"
                          for x, s in zip(r["decoded_per_ring"], r["epoch_share_per_ring"]))
              + "; copied between GPUs: "
              + copied_text(r)
              + f"; waiting for a slot: {r['slot_wait_share']:.0%}"
              + "; each ring waiting for its turn: "
              + percents(r["turn_wait_share_per_ring"])
              + "; batches not read ahead: "
              + percents(r["read_ahead_miss_share_per_ring"])
              + f" (MPS: {r['mps']})", flush=True)
        for i, shares in enumerate(r["stage_share_per_ring"]):
            print(f"  ring {i} stages: "
                  + ", ".join(f"{k} {v:.0%}" for k, v in shares.items() if v >= 0.01),
                  flush=True)
        # By demand (the server's default) a slow ring paces nobody.
        r["paced_by"] = (paced_by(r["stage_share_per_ring"]) if r["placement"] == "round-robin"
                         else [])
        if r["paced_by"]:
            print(f"  ring(s) {', '.join(map(str, r['paced_by']))} paced the others: slower in "
                  "their decode calls (hw_decode), and the rings take the stream's batches "
                  "in turn", flush=True)
        r["given_less"] = (given_less(r["epoch_share_per_ring"]) if r["placement"] == "demand"
                           else [])
        if r["given_less"]:
            print(f"  ring(s) {', '.join(map(str, r['given_less']))} slower: the plan gave "
                  "them a smaller share of the stream, so they paced nobody", flush=True)
        last_of_count = n + 1 == len(runs) or runs[n + 1][0] != g
        if args.grouped and g >= 2 and last_of_count:
            r["grouped"] = grp = producer(binary, args, g, placement, grouped=True)
            one = one_gpu_rate(results)
            print(f"grouped, the {g} readers one group (each rank fed from its GPU's ring): "
                  f"{grp['rate']:.0f} img/s" + (f" ({grp['rate'] / one:.2f}x)" if one else "")
                  + f"; copied between GPUs: {copied_text(grp)}"
                  + f"; in decode calls: {decode_calls_text(grp['stage_share_per_ring'])}"
                  + f"; waiting for a slot: {grp['slot_wait_share']:.0%}", flush=True)
        if args.separate and g >= 2 and last_of_count:
            r["separate"] = sep = separate(binary, args, g)
            one = one_gpu_rate(results)
            print(f"separate, {g} single-GPU servers at once (each decodes the whole stream for "
                  f"its reader): {sep['rate']:.0f} img/s in all; per server: "
                  + ", ".join(f"{x:.0f}" for x in sep["rate_per_server"])
                  + f"; in decode calls: {decode_calls_text(sep['stage_share_per_server'])}"
                  + (f"; each {min(sep['rate_per_server']) / one:.2f}-"
                     f"{max(sep['rate_per_server']) / one:.2f} of one GPU's rate" if one else ""),
                  flush=True)
            sep["slowed_in_decode"] = slowed_in_decode(sep["rate_per_server"],
                                                       sep["stage_share_per_server"], one)
            if sep["slowed_in_decode"]:
                print(f"  server(s) {', '.join(map(str, sep['slowed_in_decode']))} below half "
                      "of one GPU's rate with their thread in nvJPEG's calls all along: the "
                      "hardware decode in that process ran slow", flush=True)
    base = one_gpu_rate(results)
    for r in results:
        r["ratio"] = r["rate"] / base if base else None
    return results


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", help="the batchcast build (default: BATCHCAST_BUILD_DIR, build/)")
    p.add_argument("--data", default=None,
                   help="image folder, made once (default: bench_files.default_dataset)")
    p.add_argument("--images", type=int, default=20000, help="JPEGs in the made folder")
    p.add_argument("--gpus", default=None,
                   help="GPU counts, e.g. 1,2 (default: 1, 2, 4 as visible)")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--warmup", type=float, default=5.0)
    p.add_argument("--quick", action="store_true", help="shorter measurements")
    p.add_argument("--repeat", type=int, default=1,
                   help="rounds of the producer part (each GPU count in turn, each round's "
                        "ratios to its own one-GPU rate; prints the range) and of the "
                        "trainers part (each placement in turn)")
    p.add_argument("--skip", default="", help="parts to leave out: producer,trainers,ddp")
    p.add_argument("--archs", default="resnet50,resnet18",
                   help="the trainers part's models, torchvision names (default: "
                        "resnet50,resnet18)")
    p.add_argument("--separate", action="store_true",
                   help="in the producer part, after each count g of 2 or more, also g "
                        "single-GPU servers at once, one reader each (each decodes the whole "
                        "stream): what one process holding g rings costs their decode threads")
    p.add_argument("--grouped", action="store_true",
                   help="in the producer part, after each count g of 2 or more, also the "
                        "same server with its g readers one group (as a DDP job's ranks, each "
                        "fed from its own GPU's ring): the rate without copies between GPUs")
    p.add_argument("--placements", default=None, metavar="LIST",
                   help="in the producer part, each count of 2 or more GPUs once per placement "
                        "in turn, e.g. round-robin,demand: both compared in every round; in "
                        "the trainers part, the fed and decoding trainers once per placement "
                        "(default: the server's, or --server-option placement=...)")
    p.add_argument("--trainer-queues", default=None, metavar="LIST",
                   help="in the trainers part, the fed and decoding trainers once per number "
                        "of CUDA hardware queues in their processes (CUDA_DEVICE_MAX_CONNECTIONS, "
                        "1..32), e.g. 8,32; the synthetic reference keeps the environment's "
                        "(default: the environment's for all)")
    p.add_argument("--server-option", action="append", default=[], metavar="KEY=VALUE",
                   help="a `serve` option for the producer and trainer servers, e.g. "
                        "read_threads=1 (repeatable)")
    p.add_argument("--json", default=None, help="also write the results here")
    args = p.parse_args()
    if args.repeat < 1:
        p.error("--repeat: at least 1")
    if args.quick:
        args.seconds, args.warmup = min(args.seconds, 5.0), min(args.warmup, 3.0)
    build = find_build(args.build)
    import torch

    visible = torch.cuda.device_count()
    counts = ([int(x) for x in args.gpus.split(",")] if args.gpus
              else [g for g in (1, 2, 4) if g <= visible])
    counts = [g for g in counts if 1 <= g <= visible]
    if not counts:
        print(f"needs a GPU (visible: {visible})")
        return 1
    skip = set(x for x in args.skip.split(",") if x)
    for kv in args.server_option:
        key, sep, value = kv.partition("=")
        if not sep or not key:
            p.error(f"--server-option {kv!r}: expected KEY=VALUE")
        typed = {"true": True, "false": False}.get(value.lower(), value)
        SERVER[key.replace("-", "_")] = int(value) if value.isdigit() else typed
    args.placements = args.placements.split(",") if args.placements else [None]
    for placement in args.placements:
        if placement not in (None, "round-robin", "demand"):
            p.error(f"--placements: {placement!r} is not round-robin or demand")
    try:
        args.trainer_queues = ([int(x) for x in args.trainer_queues.split(",")]
                               if args.trainer_queues else [None])
    except ValueError:
        p.error(f"--trainer-queues {args.trainer_queues!r}: expected numbers, e.g. 8,32")
    if not all(q is None or 1 <= q <= 32 for q in args.trainer_queues):
        p.error(f"--trainer-queues: {args.trainer_queues} not all in 1..32")
    args.data = args.data or default_dataset(args.images)
    make_dataset(args.data, args.images, classes=100)
    warm_page_cache(args.data)
    binary = server_bin(build)
    # Each part's result records the serve options its server ran with.
    out = {"device": torch.cuda.get_device_name(0), "producer": [], "trainers": [], "ddp": []}
    if "producer" not in skip:
        for rep in range(args.repeat):
            out["producer"] += producer_round(binary, args, counts, rep)
        if args.repeat > 1:
            for g, placement in sorted({(r["gpus"], r["placement"]) for r in out["producer"]}):
                mine = [r for r in out["producer"]
                        if r["gpus"] == g and r["placement"] == placement]
                ratios = [r["ratio"] for r in mine if r["ratio"]]
                rates = [r["rate"] for r in mine]
                print(f"producer, {g} GPU(s), placement {placement}, {len(mine)} rounds: "
                      f"{min(rates):.0f}-{max(rates):.0f} img/s"
                      + (f", {min(ratios):.2f}-{max(ratios):.2f}x one GPU" if ratios else ""),
                      flush=True)
    if "trainers" not in skip:
        g = counts[-1]
        for arch in (a for a in args.archs.split(",") if a):
            # A synthetic reference before every round and after the last:
            # each round's ratios are to the two around it (with_reference).
            before, _ = trainers_at_once(args, g, arch, 128, "synthetic")
            for _ in range(args.repeat):
                rates = [trainer_rates(binary, args, g, arch, 128, placement, queues)
                         for placement in args.placements for queues in args.trainer_queues]
                after, _ = trainers_at_once(args, g, arch, 128, "synthetic")
                for r in rates:
                    out["trainers"].append(with_reference(r, before, after))
                    print_trainers(out["trainers"][-1])
                before = after
        out["trainers_summary"] = trainers_summary(out["trainers"])
        for t in out["trainers_summary"] if args.repeat > 1 else []:
            print(f"trainers, {t['arch']}, placement {t['placement']}, {queues_text(t)}"
                  f"{t['rounds']} rounds: "
                  f"reading only {t['ratio'][0]:.2f}-{t['ratio'][1]:.2f}, decoding its ring "
                  f"{t['ratio_attached'][0]:.2f}-{t['ratio_attached'][1]:.2f} of synthetic",
                  flush=True)
    for g in [g for g in counts if g >= 2 and "ddp" not in skip]:
        # ResNet-50 over 2 GPUs; ResNet-18 over more (about 10k images/s per
        # GPU, more than one GPU's decode feeds).
        arch = "resnet50" if g == 2 else "resnet18"
        for device in ("cuda:all", "attached", "cuda:0", "per-rank"):
            r = ddp(args, g, arch, device)
            out["ddp"].append(r)
            print(f"ddp, {g} ranks, {arch} batch 128, server rings {device}: "
                  f"{r['images_per_s']:.0f} img/s (MPS: {r['mps']})", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
