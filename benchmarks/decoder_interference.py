#!/usr/bin/env python3
"""What nvJPEG run by another process costs a time-sliced trainer (issue 9).

Without MPS a trainer beside a process that runs nvJPEG's hardware decoder
loses about 18 % of its speed at 3k images/s and more (benchmarks/RESULTS.md,
"Where the time goes"), whatever that process does around the decoder. This
program asks which part of the decoder does it, one GPU-host run (about 3-4
minutes on an H100):

  python3 benchmarks/decoder_interference.py --out OUT [--data DIR]
      [--rates 3000,7400] [--variants hardware:rgbi,hardware:yuv,hybrid:rgbi]
      [--input pageable|pinned] [--only-420] [--mps on]

ResNet-18 (bs 128, bf16 autocast, channels_last, SGD: benchmarks/gpu_producer.py's
trainer) on synthetic GPU data alone, then beside `gpu_pipeline_bench --modes
decode` paced at each rate, for each variant BACKEND:OUTPUT:

  hardware:rgbi  the JPEG engine, interleaved RGB: what the server runs;
  hardware:yuv   the JPEG engine, planar YUV: no colour conversion (if this
                 one costs the trainer much less, the conversion holds the
                 GPU, and the fused kernel could convert instead);
  hardware:nv12  the JPEG engine, NV12 (Y, then CbCr interleaved): the
                 format the engine may write itself, without nvJPEG's
                 per-image conversion kernel; 4:2:0 colour files only
                 (nvJPEG refuses a batch with any other file); not in the
                 default set;
  BACKEND:OUTPUT:nopipe
                 the same with NVJPEG_FLAGS_HW_DECODE_NO_PIPELINE (hardware
                 only; not in the default set);
  hybrid:rgbi    the GPU hybrid backend (Huffman on the CPU, the rest in
                 kernels): short kernels instead of the engine.

Prints, per run, the trainer's images/s and its ratio to alone, and the
decoder's own images/s and CPU cores (whether it kept its pace beside the
trainer); writes OUT/decoder_interference.json. MPS is off unless --mps on
(a private daemon for this run) or the environment says otherwise. The batchcast build is found from
BATCHCAST_BUILD_DIR (or --build).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gpu_producer  # noqa: E402  (the trainer, the dataset, the build lookup)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--data", help="an ImageFolder to use instead of making one")
    p.add_argument("--build")
    p.add_argument("--rates", default="3000,7400", help="images/s, comma-separated")
    p.add_argument("--variants", default="hardware:rgbi,hardware:yuv,hybrid:rgbi",
                   help="BACKEND:OUTPUT, comma-separated (backend hardware|hybrid, "
                        "output rgbi|yuv|nv12)")
    p.add_argument("--input", default="pageable", choices=("pageable", "pinned"),
                   help="where the decoder's files lie (gpu_pipeline_bench --nvjpeg-input)")
    p.add_argument("--only-420", action="store_true",
                   help="every variant decodes the 4:2:0 colour files only (nv12 always does)")
    p.add_argument("--mps", choices=("off", "on"), default="off",
                   help="on: start a private MPS daemon first (batchcast/_mps.py), so that "
                        "the trainer and the decoder share the GPU without time slices")
    p.add_argument("--warmup", type=float, default=3)
    p.add_argument("--measure", type=float, default=8)
    mine = p.parse_args(argv)
    gpu_producer.find_build(mine.build)  # also puts its batchcast package on sys.path
    mps = None
    if mine.mps == "on":
        # Before any CUDA work of this process and the decoder's.
        from batchcast._mps import Mps

        mps = Mps.start("on")
        os.environ.update(mps.env)
    try:
        return run(p, mine)
    finally:
        if mps is not None:
            mps.stop()


def run(p, mine):
    rates = [float(r) for r in mine.rates.split(",")]
    variants = mine.variants.split(",")
    for v in variants:
        parts = v.split(":")
        if (len(parts) not in (2, 3) or parts[0] not in ("hardware", "hybrid")
                or parts[1] not in ("rgbi", "yuv", "nv12")
                or (len(parts) == 3 and (parts[2] != "nopipe" or parts[0] != "hardware"))):
            p.error(f"bad variant {v!r}: BACKEND:OUTPUT[:nopipe], backend hardware|hybrid, "
                    "output rgbi|yuv|nv12, nopipe with hardware only")
    # The trainer's and the dataset's settings as gpu_producer.py has them.
    args = gpu_producer.parse_args(["--out", mine.out, "--warmup", str(mine.warmup),
                                    "--measure", str(mine.measure)])
    build = gpu_producer.find_build(mine.build)
    os.makedirs(mine.out, exist_ok=True)
    data = mine.data or os.path.join("/tmp", f"bc_gpu_producer_{args.classes}x{args.per_class}")
    gpu_producer.make_dataset(args, data)
    gpu_producer.warm_page_cache(data)
    import torch

    result = {"device": torch.cuda.get_device_name(0), "data": data,
              "mps_pipe_directory": os.environ.get("CUDA_MPS_PIPE_DIRECTORY"),
              "alone": gpu_producer.train_rate(args), "runs": []}
    lines = [f"{result['device']}; ResNet-18 bs {args.train_batch} bf16 channels_last alone: "
             f"{result['alone']:,.0f} img/s"]
    for variant in variants:
        for rate in rates:
            backend, output, *nopipe = variant.split(":")
            trainer, decoder = gpu_producer.train_beside(args, gpu_producer.bench_cmd(
                build, data, args, "decode", gpu_producer.beside_seconds(args), "--rate",
                str(rate), "--nvjpeg-backend", backend, "--nvjpeg-output", output,
                "--nvjpeg-pipeline", "off" if nopipe else "on", "--nvjpeg-input", mine.input,
                *(["--only-420"] if mine.only_420 else [])))
            run = {"variant": variant, "rate_asked": rate, "trainer": trainer,
                   "ratio": trainer / result["alone"], "decoder": decoder}
            result["runs"].append(run)
            got = (f"decoder {decoder['images_per_s']:,.0f} img/s on "
                   f"{decoder['cpu_cores_used']:.2f} cores ({decoder.get('backend')})"
                   if "images_per_s" in decoder else f"decoder failed: {decoder['error']}")
            lines.append(f"beside {variant} at {rate:,.0f} img/s: trainer {trainer:,.0f} img/s "
                         f"= {run['ratio']:.2f}; {got}")
    with open(os.path.join(mine.out, "decoder_interference.json"), "w") as f:
        json.dump(result, f, indent=1)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
