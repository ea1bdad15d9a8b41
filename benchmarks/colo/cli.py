"""benchmarks/colocate.py's command line: the options, the dataset, the run."""
import argparse
import json
import os
import sys
import time
from typing import Dict, List, Optional, Sequence

from bench_files import default_dataset, make_dataset, warm_page_cache
from bench_server import find_build, server_bin
from colo.jobs import job_main
from colo.measure import Bench
from colo.report import demo_intro, demo_report, merge, write_outputs
from colo.sources import DEFAULT_SOURCES, SERVED, SOURCES

STARTED = time.monotonic()  # --budget counts from here (the dataset's making included)
DEFAULT_MODELS = ("resnet18", "resnet50", "vit_b_32")
DEFAULT_BATCH = {"resnet18": 128, "resnet50": 64, "vit_b_32": 128, "vit_b_16": 32,
                 "efficientnet_b0": 64, "tiny_cnn": 32}


def parse_batch_sizes(specs: Optional[List[str]], models: List[str]) -> Dict[str, List[int]]:
    """{model: [batch sizes dealt to jobs in turn]} from "B" or "MODEL=B1,B2" items."""
    out = {m: [DEFAULT_BATCH.get(m, 64)] for m in models}
    for spec in specs or []:
        if "=" in spec:
            model, _, sizes = spec.partition("=")
            targets = [model]
        else:
            sizes, targets = spec, list(models)
        for m in targets:
            out[m] = [int(b) for b in sizes.split(",")]
    return out


def _csv(kind):
    return lambda text: [kind(x) for x in text.split(",") if x]


def parse_args(argv: Sequence[str], doc: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0], epilog=doc,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="colocate-out", help="output folder")
    p.add_argument("--jobs", type=_csv(int), default=[1, 2, 4, 8], help="N values, e.g. 1,2,4,8")
    p.add_argument("--models", type=_csv(str), default=list(DEFAULT_MODELS))
    p.add_argument("--sources", type=_csv(str), default=list(DEFAULT_SOURCES),
                   help=f"of {','.join(SOURCES)} (default {','.join(DEFAULT_SOURCES)})")
    p.add_argument("--mps", type=_csv(str), default=["off", "on"], help="off,on")
    p.add_argument("--batch-size", action="append", metavar="[MODEL=]B[,B...]",
                   help=f"per model (default {DEFAULT_BATCH}); a list is dealt to the jobs")
    p.add_argument("--repeat", type=int, default=1,
                   help="rounds: each row measured this many times, every source once a round; "
                   "figures are the median round's, with their range")
    p.add_argument("--device", default="cuda:0", help="cuda:N or cpu")
    p.add_argument("--size", type=int, default=224, help="input size")
    p.add_argument("--warmup", type=float, default=1.5, help="seconds before the timed window")
    p.add_argument("--measure", type=float, default=2.5, help="seconds of the timed window")
    p.add_argument("--setup-steps", type=int, default=2, help="untimed steps at set-up")
    p.add_argument("--data", help="ImageFolder (default: made with tools/make_dataset.py)")
    p.add_argument("--images", type=int, default=10000, help="images of the made dataset")
    p.add_argument("--photos", help="make_dataset.py --photos DIR (default ../shared/data/photos "
                   "where it exists)")
    p.add_argument("--dl-workers", type=int, help="DataLoader workers per job "
                   "(default max(1, (cores - N) // N))")
    p.add_argument("--server-workers", type=int, default=0,
                   help="server --workers (0: its default)")
    p.add_argument("--server-batch", type=int, default=256, help="server --batch-size")
    p.add_argument("--server-window", type=int, default=0, help="server --window (0: its default)")
    p.add_argument("--server-bin", help="batchcast-server (default: the build's tools/)")
    p.add_argument("--threads", type=int, default=1, help="torch threads per job (CPU device)")
    p.add_argument("--cores", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--budget", type=float, default=0,
                   help="seconds since the start (dataset making included): start no phase that "
                   "would end later (0 = no limit)")
    p.add_argument("--quick", action="store_true",
                   help="N in 1,4; resnet18; warm-up 1 s, 2 s measured (~1.5 min on the GPU host)")
    p.add_argument("--smoke", action="store_true",
                   help="CPU smoke run: tiny_cnn, 32 px, N in 1,2, 64 images, MPS off (seconds)")
    p.add_argument("--demo", action="store_true",
                   help="scripts/demo.sh: 2 jobs of tiny_cnn on the CPU (batch 32 and 48), "
                   "per-job DataLoaders (1 worker each) vs one server (2 workers), side by side")
    p.add_argument("--plot-only", nargs="+", metavar="JSON",
                   help="only write the table and plots of these result files (merged)")
    args = p.parse_args(argv)
    if args.quick:
        args.jobs, args.models, args.warmup, args.measure = [1, 4], ["resnet18"], 1.0, 2.0
    if args.smoke:
        args.device, args.models, args.size, args.jobs = "cpu", ["tiny_cnn"], 32, [1, 2]
        args.mps, args.images, args.warmup, args.measure = ["off"], 64, 0.3, 0.8
        args.setup_steps, args.server_batch, args.server_window = 1, 16, 4
        args.batch_size = args.batch_size or ["8"]
        args.dl_workers = 1 if args.dl_workers is None else args.dl_workers
        args.server_workers = args.server_workers or 1
    if args.demo:
        args.device, args.models, args.size, args.jobs = "cpu", ["tiny_cnn"], 64, [2]
        args.mps, args.sources, args.batch_size = ["off"], ["dataloader", "batchcast"], ["32,48"]
        args.dl_workers, args.server_workers = 1, 2
        args.server_batch, args.server_window, args.setup_steps = 64, 8, 2
        args.warmup = 3.0 if args.warmup == 1.5 else args.warmup
        args.measure = 10.0 if args.measure == 2.5 else args.measure
    for s in args.sources:
        if s not in SOURCES:
            p.error(f"unknown source {s!r} (choose from {', '.join(SOURCES)})")
    for m in args.mps:
        if m not in ("off", "on"):
            p.error(f"--mps takes off,on; got {m!r}")
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    args.batch_sizes = parse_batch_sizes(args.batch_size, args.models)
    args.amp = args.device.startswith("cuda")
    args.jobs = sorted(set(args.jobs))
    return args


def prepare(args: argparse.Namespace, build: Optional[str]) -> None:
    """The dataset (made unless --data exists; read into the page cache) and the server binary."""
    needs_data = any(s in args.sources for s in ("dataloader",) + SERVED)
    if needs_data:
        if not args.data:
            args.data = default_dataset(args.images)
        t = time.monotonic()
        made = not os.path.isdir(args.data)
        args.images = make_dataset(args.data, args.images, photos=args.photos, workers=args.cores)
        size = warm_page_cache(args.data)
        print(f"dataset: {args.data}, {args.images} JPEGs, {size / 2**20:.0f} MiB, in the page "
              f"cache ({'made and ' if made else ''}read in {time.monotonic() - t:.0f} s)",
              flush=True)
    if any(s in args.sources for s in SERVED) and not args.server_bin:  # hosted: for `stat`
        args.server_bin = server_bin(build)


def main(argv: Optional[Sequence[str]], doc: str) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--job" in argv:  # a job process (colo/jobs.py)
        find_build()
        job_main(json.loads(argv[argv.index("--host") + 1]) if "--host" in argv else None)
        return 0
    args = parse_args(argv, doc)
    build = find_build()
    if args.plot_only:
        results = merge(args.plot_only)
        out = args.out if args.out != "colocate-out" else os.path.dirname(args.plot_only[0]) or "."
        os.makedirs(out, exist_ok=True)
        if len(args.plot_only) > 1:
            with open(os.path.join(out, "colocate.json"), "w") as f:
                json.dump(results, f, indent=1)
        write_outputs(results, out)
        return 0
    prepare(args, build)
    bench = Bench(args, STARTED)
    phases = (len(args.mps) * len(args.jobs) * len(args.models) * len(args.sources)
              * args.repeat)
    if args.demo:
        print(demo_intro(args), flush=True)
    else:
        print(f"co-location benchmark: {phases} phases of {args.warmup}+{args.measure} s "
              f"(about {phases * bench.phase_seconds() / 60:.1f} min); output in {args.out}",
              flush=True)
    try:
        bench.run()
    except KeyboardInterrupt:
        print("interrupted: writing what was measured", flush=True)
        bench.save()
    if args.demo:
        print(demo_report(bench.results, args.out), flush=True)
        return 0
    write_outputs(bench.results, args.out)
    print(f"done in {bench.elapsed():.0f} s", flush=True)
    return 0
