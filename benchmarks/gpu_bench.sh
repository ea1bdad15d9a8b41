#!/usr/bin/env bash
# The single-GPU benchmarks, on a GPU host (about 5 minutes):
#   [PHOTOS=DIR] benchmarks/gpu_bench.sh BUILD_DIR OUT_DIR [IMAGES]
# 1. benchmarks/gpu_feed.py: the server feeding a Loader against nvJPEG
#    decode-only, 3 rounds (it makes the dataset: IMAGES JPEGs, default 10000,
#    from the photos in PHOTOS where given)
# 2. consumer overhead per batch (Next() to a device view), synthetic device ring
# 3. GPU memory of the server and consumers with 1 and 8 consumers (nvidia-smi)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${1:?build dir}
OUT=${2:?out dir}
IMAGES=${3:-10000}
DATA=/tmp/batchcast-bench-$IMAGES  # bench_files.default_dataset
mkdir -p "$OUT"
S="$B/tools/batchcast-server"
wait_server() { for _ in $(seq 600); do "$S" stat "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
nproc

echo "== server -> Loader against nvJPEG decode-only"
BATCHCAST_BUILD_DIR=$B timeout 400 python3 "$ROOT/benchmarks/gpu_feed.py" --out "$OUT/feed" \
  --images "$IMAGES" --data "$DATA" --repeat 3 ${PHOTOS:+--photos "$PHOTOS"}

echo "== consumer overhead (synthetic ring on cuda:0, size 64)"
"$S" serve --synthetic 100000 --size 64 --name ovh --device cuda:0 --batch-size 256 --window 8 \
  --status-interval 0 > "$OUT/ovh.server.log" 2>&1 &
SPID=$!
wait_server ovh
for bs in 256 64 100; do
  timeout 120 "$B/benchmarks/gpu_consumer_bench" ovh --batch-size $bs --batches 2000 \
    --sleep-us 1000 | tee -a "$OUT/overhead.json"
done
timeout 120 "$B/benchmarks/gpu_consumer_bench" ovh --batch-size 256 --batches 3000 | tee -a "$OUT/overhead.json"
kill $SPID; wait $SPID

echo "== memory: 1 and 8 consumers (train 224 bfloat16, batch 256)"
nvidia-smi --query-gpu=memory.used --format=csv,noheader | sed 's/^/idle: /'
"$S" serve "$DATA" --name mem --device cuda:0 --batch-size 256 --dtype bfloat16 \
  --status-interval 0 > "$OUT/mem.server.log" 2>&1 &
SPID=$!
wait_server mem
sleep 2
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | sed 's/^/server only: /'
for k in 1 8; do
  pids=()
  for i in $(seq $k); do
    "$B/benchmarks/gpu_consumer_bench" mem --batch-size 100 --batches 100 --linger-s 8 \
      > "$OUT/mem.c$i.log" 2>&1 &
    pids+=($!)
  done
  sleep 6
  echo "-- $k consumer(s): server pid $SPID"
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader
  nvidia-smi --query-gpu=memory.used --format=csv,noheader | sed 's/^/total used: /'
  wait "${pids[@]}"
done
kill $SPID; wait $SPID
echo "done"
