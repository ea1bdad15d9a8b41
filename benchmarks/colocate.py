#!/usr/bin/env python3
"""Co-location benchmark: N training jobs on one GPU, fed four ways.

N separate training processes (torchvision models, bf16 autocast, SGD; a
plain loop over their batches) run at once on one device, their data coming
from (colo/sources.py)

  synthetic   tensors made once on the device (data-unbound: the GPU's limit)
  dataloader  one torch DataLoader per job over an ImageFolder (RandomResizedCrop,
              flip, ToTensor, Normalize), the node's cores split among the jobs:
              max(1, (cores - N) // N) workers each (one core per job's own loop)
  batchcast   one batchcast-server process over the same folder (ring on the
              device, GPU decode where built), each job a
              batchcast.Loader(name, batch_size=B)
  hosted      (only when asked: --sources ...,hosted) the same server run by
              batchcast.Server inside job 0's process, created before job 0
              starts CUDA (README, "Several jobs on one GPU"); every job, job 0
              too, a batchcast.Loader

each with NVIDIA MPS off and on (where nvidia-cuda-mps-control can start it).
The server has the options of the README's recipes (device, --server-batch,
the input size, bfloat16) and the defaults for everything else. For every
(MPS, model, data, N) it reports per-job images/s and step time, the images/s
of all jobs together and over the synthetic row's, the co-location speed-up

    delta = sum over jobs of (the job's step time alone) / (max co-located step time)

(Tabrizian 2020, eq. 4.1; "alone" = the same model, batch and data source
with N = 1 and the same MPS setting; > 1 means sharing the GPU beats running
the jobs one after another), the CPU cores spent on loading (DataLoader
workers, or the server process, from /proc) and by the jobs themselves, and
GPU memory per process (nvidia-smi, and torch's reserved memory). With
--repeat R every row is measured in R rounds (each round measures every
source once, back to back) and each figure is given with its range.

Usage (GPU host; --budget stops starting phases in time for a 10-minute call):

  python3 benchmarks/colocate.py --out OUT --models resnet18 --budget 540
  python3 benchmarks/colocate.py --out OUT --models resnet18 --jobs 4 \\
      --sources synthetic,batchcast,hosted --repeat 3 --warmup 3 --measure 6
  python3 benchmarks/colocate.py --out OUT --quick                   # ~1.5 min
  python3 benchmarks/colocate.py --plot-only A/colocate.json B/colocate.json ... --out DIR

Smoke run (CPU, seconds): python3 benchmarks/colocate.py --smoke --out /tmp/colo

Writes OUT/colocate.json (every number, every repeat, rewritten after each
phase, so a run cut short keeps what it measured), OUT/colocate.md (the
table), OUT/colocate_throughput.png and OUT/colocate_delta.png (matplotlib;
without it the plots are skipped with a note: make them elsewhere with
--plot-only), OUT/colocate-server.log and OUT/colocate-jobs.log.

How a phase runs (colo/measure.py): the job processes (kept across phases
of one MPS setting and N; a model change rebuilds the model) set up their
model and data and run two steps; then all start together at t0, train
`warmup` seconds, and the steps that end within the next `measure` seconds
are timed (step time = their span / their count; every step ends with
loss.item(), so it includes the GPU work). CPU is read from /proc at the
window's ends. The dataset (10,000 JPEGs by default, made by
tools/make_dataset.py) is read into the page cache first, so the loading is
decoding, not the disk; the DataLoader decodes every image every epoch, and
so does the server (its device cache of CPU-decoded files is off by
default; its default transcode cache keeps the progressive files, about 5 %,
as baseline JPEGs for the hardware decoder after their first use). One epoch
is read through the server before it is measured.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from colo.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(None, __doc__))
