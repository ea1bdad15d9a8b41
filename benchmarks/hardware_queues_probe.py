#!/usr/bin/env python3
"""How many CUDA hardware queues a process got, seen from the GPU (Note
[Hardware queues], cuda/include/batchcast/cuda/hardware_queues.h).

  BATCHCAST_BUILD_DIR=build python3 benchmarks/hardware_queues_probe.py

Each case runs in a fresh interpreter with CUDA_DEVICE_MAX_CONNECTIONS unset
(or as the case says), starts CUDA its own way, then probes: a long kernel
on one stream and a tiny one that must wait for it, then a tiny kernel on
each of the next 15 streams of torch's pool. A stream that shares the first
stream's hardware queue waits behind its waiting kernel (`blocked`): 1 or
more with 8 queues, 0 with 32. Cases:

  server_first      batchcast.Server(device="cuda:0") before any CUDA work
  torch_first       torch.zeros(1, device="cuda") first, then the Server
  available_first   torch.cuda.is_available() first (the driver starts, no
                    context yet), then the Server
  env_8             CUDA_DEVICE_MAX_CONNECTIONS=8 set, then the Server
  torch_only        no Server at all (CUDA's default)

Prints one JSON line per case: blocked streams (and which, counted from the
first), and how many of the Server's RuntimeWarnings named the hardware
queues.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
VAR = "CUDA_DEVICE_MAX_CONNECTIONS"

PROBE = """
import json, os, sys, time, warnings
import torch
{before}
import batchcast
caught = []
if {server}:
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        batchcast.Server(synthetic=100, size=8, device="cuda:0", name="queues-%d" % os.getpid()).close()
    caught = [str(x.message) for x in w if "hardware queue" in str(x.message)]
first = torch.cuda.Stream()
others = [torch.cuda.Stream() for _ in range(15)]
x = torch.zeros(16, device="cuda")
z = torch.zeros(16, device="cuda")
torch.cuda.synchronize()
blocked = None
for _ in range(3):  # the fewest of three tries: a try can be disturbed
    with torch.cuda.stream(first):
        torch.cuda._sleep(int(3e8))  # a few hundred ms
        x[0:1].add_(1)  # waits for the sleep, and holds its hardware queue meanwhile
    events = []
    for s in others:
        with torch.cuda.stream(s):
            z.add_(1)
            e = torch.cuda.Event()
            e.record(s)
            events.append(e)
    time.sleep(0.05)
    n = [i + 1 for i, e in enumerate(events) if not e.query()]
    blocked = n if blocked is None or len(n) < len(blocked) else blocked
    torch.cuda.synchronize()
print(json.dumps({{"blocked": len(blocked), "which": blocked, "warnings": len(caught),
                  "env_after": os.environ.get("{var}")}}))
"""

CASES = {
    "server_first": ("", True, None),
    "torch_first": ("torch.zeros(1, device='cuda')", True, None),
    "available_first": ("assert torch.cuda.is_available()", True, None),
    "env_8": ("", True, "8"),
    "torch_only": ("", False, None),
}


def run_case(case, pydir, timeout=120):
    """One case in a fresh interpreter: its JSON result (dict)."""
    before, server, value = CASES[case]
    env = {k: v for k, v in os.environ.items() if k != VAR}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pydir, env.get("PYTHONPATH")) if p)
    if value is not None:
        env[VAR] = value
    code = PROBE.format(before=before, server=server, var=VAR)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{case} failed:\n{r.stdout}{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", default=",".join(CASES), help="comma-separated, of: " + ", ".join(CASES))
    p.add_argument("--build", default=os.environ.get("BATCHCAST_BUILD_DIR", os.path.join(REPO, "build")))
    a = p.parse_args(argv)
    cases = [c for c in a.cases.split(",") if c]
    bad = [c for c in cases if c not in CASES]
    if bad or not cases:
        p.error(f"unknown case(s) {bad}; known: {', '.join(CASES)}")
    for case in cases:
        print(json.dumps({"case": case, **run_case(case, os.path.join(a.build, "python"))}),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
