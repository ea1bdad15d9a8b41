#!/usr/bin/env bash
# The multi-GPU check on a host with 2 or more GPUs:
# builds what it needs with CUDA, runs the multi-GPU tests (C++: ctest label
# `multigpu`; Python: tests/python/test_multi_gpu.py, plus the one-GPU CUDA
# suites as a guard) and the aggregate producer benchmark
# (benchmarks/multi_gpu.py, its producer part: 1, 2 and 4 GPUs where visible). For the device
# machine, with the carried .gpu-deps sourced first:
#   scripts/multi_gpu_check.sh [BUILD_DIR] [LOG_DIR] [all|build|run]
# (`build` then `run` splits it into two shorter commands.) Logs: LOG_DIR/multi_gpu_check.log (everything), LOG_DIR/multi_gpu.json (the
# benchmark's figures). Exit 0 when every step passed.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$ROOT/build-gpu}
L=${2:-$ROOT/multi-gpu-logs}
WHAT=${3:-all}
mkdir -p "$L"
LOG=$L/multi_gpu_check.log
cd "$ROOT"
step() { local t=$1; shift; echo "== $* ($(date +%T))" >>"$LOG"; timeout "$t" "$@" >>"$LOG" 2>&1; local rc=$?; echo "== rc=$rc" >>"$LOG"; return $rc; }
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv >>"$LOG" 2>&1
nvidia-smi topo -m >>"$LOG" 2>&1
gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
echo "GPUs visible: $gpus" >>"$LOG"
if [ "$WHAT" != run ]; then
  step 300 cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DPython3_EXECUTABLE="$(command -v python3)" || exit 1
  step 500 cmake --build "$B" -j "$(nproc)" --target batchcast-server _core multi_gpu_test \
    gpu_engine_test server_test client_test || exit 1
  [ "$WHAT" = build ] && { tail -3 "$LOG"; exit 0; }
fi
(cd "$B" && step 200 ctest --timeout 200 --output-on-failure -R 'MultiGpu|GpuEngine|DeviceList|ControlLoopRings')
ctest_rc=$?
BATCHCAST_BUILD_DIR="$B" PYTHONPATH="$B/python" \
  step 200 python3 -m pytest tests/python/test_multi_gpu.py tests/python/test_cuda.py -v -p no:cacheprovider
py_rc=$?
BATCHCAST_BUILD_DIR="$B" step 240 python3 benchmarks/multi_gpu.py --build "$B" --skip trainers,ddp \
  --json "$L/multi_gpu.json"
bench_rc=$?
echo "ctest rc=$ctest_rc pytest rc=$py_rc bench rc=$bench_rc (GPUs: $gpus)" >>"$LOG"
tail -8 "$LOG"
[ $ctest_rc -eq 0 ] && [ $py_rc -eq 0 ] && [ $bench_rc -eq 0 ]
