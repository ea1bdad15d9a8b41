#!/usr/bin/env bash
# Runs the stress programs of tests/stress one after the other and says which
# failed (chaos, hostile peers, soak):
#   bc_chaos      kill -9 of consumers and servers, restarts; every survivor's
#                 epochs checked exactly once and in order (ipc, then tcp)
#   bc_fuzz_peer  hostile peers over ipc:// and tcp://127.0.0.1 while a good
#                 consumer checks every byte
#   bc_soak       a C++ consumer and a Python Loader, every epoch exact,
#                 memory of every process sampled
#
#   scripts/stress.sh                 the long runs, by hand (about 25 minutes:
#                                     chaos 5 min ipc + 100 s tcp, hostile peers
#                                     5 min per transport, soak 10^6 batches)
#   scripts/stress.sh --short         what CI runs (ctest label `stress`; ~40 s)
#   scripts/stress.sh --chaos-seconds 60 --fuzz-seconds 30 --soak-batches 100000 --seed 7
#   BUILD_DIR=build-asan scripts/stress.sh --short   against the sanitized build
#                                     (scripts/check_sanitizers.sh makes it)
# Options: --chaos-seconds S (ipc; tcp gets S/3), --fuzz-seconds S (per
# transport), --soak-batches N, --seed N (0: a new one each run, printed),
# --connections N and --huge-mib N (hostile peers), --log-dir DIR (keep every
# log; default: kept only for failed runs, in temporary directories named in
# the output). Builds the programs in ${BUILD_DIR:-build} first.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
CHAOS_S=300 FUZZ_S=300 SOAK_BATCHES=1000000 SEED=0 CONNECTIONS=1000 HUGE_MIB=100 LOG_DIR=""
while [ $# -gt 0 ]; do
  case "$1" in
    --short) CHAOS_S=8 FUZZ_S=5 SOAK_BATCHES=20000 SEED=1 CONNECTIONS=200 HUGE_MIB=8 ;;
    --long) ;;
    --chaos-seconds) CHAOS_S=$2; shift ;;
    --fuzz-seconds) FUZZ_S=$2; shift ;;
    --soak-batches) SOAK_BATCHES=$2; shift ;;
    --seed) SEED=$2; shift ;;
    --connections) CONNECTIONS=$2; shift ;;
    --huge-mib) HUGE_MIB=$2; shift ;;
    --log-dir) LOG_DIR=$2; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "stress.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ "$SEED" = 0 ]; then SEED=$(( (RANDOM << 15) + RANDOM + 1 )); fi
TARGETS=(bc_chaos bc_fuzz_peer bc_soak)
if grep -q '^BATCHCAST_BUILD_PYTHON:BOOL=ON' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null; then
  TARGETS+=(_core)
fi
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target "${TARGETS[@]}" || exit 2
S="$BUILD_DIR/tests/stress"

declare -a NAMES RCS TIMES
run() {  # name, command...
  local name=$1; shift
  local logs=()
  [ -n "$LOG_DIR" ] && logs=(--log-dir "$LOG_DIR/$name")
  echo "== $name: $* ${logs[*]}"
  local t0=$SECONDS
  "$@" "${logs[@]}"
  local rc=$?
  NAMES+=("$name") RCS+=("$rc") TIMES+=("$((SECONDS - t0))")
}
run chaos-ipc "$S/bc_chaos" --seconds "$CHAOS_S" --seed "$SEED"
run chaos-tcp "$S/bc_chaos" --seconds "$(( (CHAOS_S + 2) / 3 ))" --seed "$((SEED + 1))" --transport tcp
run fuzz "$S/bc_fuzz_peer" --seconds "$FUZZ_S" --seed "$SEED" --transport both \
  --connections "$CONNECTIONS" --huge-mib "$HUGE_MIB"
run soak "$S/bc_soak" --batches "$SOAK_BATCHES" --seed "$SEED"

echo "== stress.sh (seed $SEED, $BUILD_DIR):"
fail=0
for i in "${!NAMES[@]}"; do
  status=ok
  [ "${RCS[$i]}" -ne 0 ] && { status="FAILED (exit ${RCS[$i]})"; fail=1; }
  printf '   %-10s %5s s  %s\n' "${NAMES[$i]}" "${TIMES[$i]}" "$status"
done
exit $fail
