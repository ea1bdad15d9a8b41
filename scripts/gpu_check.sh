#!/usr/bin/env bash
# The GPU host's check: builds with CUDA (and nvJPEG where the toolkit has it)
# and runs every test there, the GPU ones included, then compute-sanitizer
# (memcheck with leak check, racecheck and synccheck) on a server + consumer
# pair with the ring on cuda:0 (tests/gpu/sanitizer.sh; about 2 minutes;
# GPU_SANITIZER=0 skips it). For the device machine:
#   scripts/gpu_check.sh [BUILD_DIR] [LOG]
# with the carried .gpu-deps (scripts/prepare_gpu_deps.sh) sourced first.
# Each step has its own timeout; output goes to LOG (default stdout).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${1:-$ROOT/build-gpu}
LOG=${2:-/dev/stdout}
cd "$ROOT"
export BATCHCAST_PYTHON=${BATCHCAST_PYTHON:-$(command -v python3)}  # for tools/make_dataset.py in tests
step() { local t=$1; shift; echo "== $* ($(date +%T))" >>"$LOG"; timeout "$t" "$@" >>"$LOG" 2>&1; local rc=$?; echo "== rc=$rc" >>"$LOG"; return $rc; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >>"$LOG" 2>&1
step 300 cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DPython3_EXECUTABLE="$(command -v python3)" || exit 1
step 500 cmake --build "$B" -j "$(nproc)" || exit 1
(cd "$B" && step 400 ctest -j 4 --timeout 300 --output-on-failure)
ctest_rc=$?
BATCHCAST_BUILD_DIR="$B" PYTHONPATH="$B/python" \
  step 300 python3 -m pytest tests/python -q -p no:cacheprovider -x
py_rc=$?
san_rc=0
if [ "${GPU_SANITIZER:-1}" != 0 ]; then
  SAN_DATA=/tmp/bc_sanitizer_data
  [ -d $SAN_DATA ] || step 120 python3 tools/make_dataset.py $SAN_DATA --classes 2 \
    --per-class 12 --hazards --seed 5 --quiet
  export SANITIZER_TIMEOUT=${SANITIZER_TIMEOUT:-120}
  step 420 tests/gpu/sanitizer.sh "$B" "$SAN_DATA"
  san_rc=$?
fi
# With 2 or more GPUs the multi-GPU tests ran above (ctest label multigpu,
# tests/python/test_multi_gpu.py; they skip with one GPU): say so, verbosely.
multi_rc=0
if [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ]; then
  (cd "$B" && step 200 ctest -L multigpu --timeout 200 --output-on-failure -V)
  multi_rc=$?
  BATCHCAST_BUILD_DIR="$B" PYTHONPATH="$B/python" \
    step 200 python3 -m pytest tests/python/test_multi_gpu.py -v -p no:cacheprovider
  multi_rc=$((multi_rc | $?))
fi
echo "ctest rc=$ctest_rc pytest rc=$py_rc compute-sanitizer rc=$san_rc multi-gpu rc=$multi_rc" >>"$LOG"
[ $ctest_rc -eq 0 ] && [ $py_rc -eq 0 ] && [ $san_rc -eq 0 ] && [ $multi_rc -eq 0 ]
