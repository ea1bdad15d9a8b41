#!/usr/bin/env bash
# compute-sanitizer on a batchcast server and a consumer with the ring on
# cuda:0. Run on a GPU host after building:
#   tests/gpu/sanitizer.sh BUILD_DIR [DATASET]
# scripts/gpu_check.sh runs it (with a small generated DATASET).
# For each tool of $SANITIZER_TOOLS (default: memcheck racecheck synccheck):
#  1. synthetic source (pinned staging + copies), consumer batch 48 (zero-copy
#     and gathered batches), 2 epochs;
#  2. memcheck only, with DATASET: the nvJPEG + fused-kernel path, 2 epochs.
# memcheck also checks for leaks (--leak-check full). Every process is bounded
# by $SANITIZER_TIMEOUT seconds (default 120). Prints each run's summary;
# exits non-zero when any tool reports an error or a process fails.
set -u
B=${1:?build dir}
DATA=${2:-}
CS=${COMPUTE_SANITIZER:-compute-sanitizer}
TOOLS=${SANITIZER_TOOLS:-memcheck racecheck synccheck}
LIMIT=${SANITIZER_TIMEOUT:-120}
fail=0
run_pair() {  # tool, name, server args..., --, consumer args...
  local tool=$1 name=$2; shift 2
  local sargs=() cargs=() cs=("$CS" --tool "$tool" --error-exitcode 99)
  [ "$tool" = memcheck ] && cs+=(--leak-check full)
  while [ "$1" != "--" ]; do sargs+=("$1"); shift; done; shift
  cargs=("$@")
  local t0=$SECONDS
  timeout "$LIMIT" "${cs[@]}" \
    "$B/tools/batchcast-server" serve "${sargs[@]}" --name "$name" --device cuda:0 \
    --status-interval 0 > "/tmp/$name.server.log" 2>&1 &
  local spid=$!
  for _ in $(seq 300); do "$B/tools/batchcast-server" stat "$name" >/dev/null 2>&1 && break; sleep 0.1; done
  timeout "$LIMIT" "${cs[@]}" \
    "$B/tests/bc_test_consumer" --endpoint "$name" --out "/tmp/$name.json" "${cargs[@]}" \
    > "/tmp/$name.consumer.log" 2>&1
  local crc=$?
  wait $spid; local src=$?
  echo "== $tool $name: server rc=$src consumer rc=$crc ($((SECONDS - t0)) s)"
  grep -E "ERROR SUMMARY|LEAK SUMMARY|RACECHECK SUMMARY|Invalid|error" "/tmp/$name.server.log" | head -20
  grep -E "ERROR SUMMARY|LEAK SUMMARY|RACECHECK SUMMARY|Invalid|error" "/tmp/$name.consumer.log" | head -20
  head -c 300 "/tmp/$name.json"; echo
  [ $src -eq 0 ] && [ $crc -eq 0 ] || fail=1
}
for tool in $TOOLS; do
  run_pair "$tool" "san-$tool-synth" --synthetic 2000 --size 32 --batch-size 64 --window 4 \
    --epochs 2 -- --batch-size 48 --epochs 2 --no-drop-last
  if [ -n "$DATA" ] && [ "$tool" = memcheck ]; then
    run_pair "$tool" "san-$tool-image" "$DATA" --decode gpu --batch-size 8 --window 4 --epochs 2 \
      --size 64 -- --batch-size 8 --epochs 2 --no-verify
  fi
done
exit $fail
