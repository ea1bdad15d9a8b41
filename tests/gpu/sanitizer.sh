#!/usr/bin/env bash
# compute-sanitizer memcheck on a batchcast server and a consumer with the ring
# on cuda:0 (issue 4, check 4). Run on a GPU host after building:
#   tests/gpu/sanitizer.sh BUILD_DIR [DATASET]
# 1. synthetic source (pinned staging + copies), consumer batch 48 (zero-copy
#    and gathered batches), 2 epochs; 2. with DATASET: the nvJPEG + fused-kernel
#    path for one epoch. Prints each tool's summary; exits non-zero on errors.
set -u
B=${1:?build dir}
DATA=${2:-}
CS=${COMPUTE_SANITIZER:-compute-sanitizer}
fail=0
run_pair() {  # name, server args..., --, consumer args...
  local name=$1; shift
  local sargs=() cargs=()
  while [ "$1" != "--" ]; do sargs+=("$1"); shift; done; shift
  cargs=("$@")
  $CS --tool memcheck --leak-check full --error-exitcode 99 \
    "$B/tools/batchcast-server" serve "${sargs[@]}" --name "$name" --device cuda:0 \
    --status-interval 0 > "/tmp/$name.server.log" 2>&1 &
  local spid=$!
  for _ in $(seq 300); do "$B/tools/batchcast-server" stat "$name" >/dev/null 2>&1 && break; sleep 0.1; done
  $CS --tool memcheck --leak-check full --error-exitcode 99 \
    "$B/tests/bc_test_consumer" --endpoint "$name" --out "/tmp/$name.json" "${cargs[@]}" \
    > "/tmp/$name.consumer.log" 2>&1
  local crc=$?
  wait $spid; local src=$?
  echo "== $name: server rc=$src consumer rc=$crc"
  grep -E "ERROR SUMMARY|LEAK SUMMARY|Invalid|error" "/tmp/$name.server.log" | head -20
  grep -E "ERROR SUMMARY|LEAK SUMMARY|Invalid|error" "/tmp/$name.consumer.log" | head -20
  head -c 300 "/tmp/$name.json"; echo
  [ $src -eq 0 ] && [ $crc -eq 0 ] || fail=1
}
run_pair san-synth --synthetic 2000 --size 32 --batch-size 64 --window 4 --epochs 2 -- \
  --batch-size 48 --epochs 2 --no-drop-last
if [ -n "$DATA" ]; then
  run_pair san-image "$DATA" --decode gpu --batch-size 8 --window 4 --epochs 2 --size 64 -- \
    --batch-size 8 --epochs 2 --no-verify
fi
exit $fail
