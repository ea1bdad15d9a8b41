#!/usr/bin/env bash
# The GPU numbers of benchmarks/RESULTS.md ("GPU (H100)"), on a GPU host:
#   benchmarks/gpu_bench.sh BUILD_DIR OUT_DIR [IMAGES_PER_CLASS]
# 1. dataset: tools/make_dataset.py, 100 classes x IMAGES_PER_CLASS (default 30)
# 2. gpu_pipeline_bench: nvJPEG decode-only vs CudaImageSource::FillBatch
# 3. producer throughput through a real server (train, 224, float16, NCHW,
#    batch 256) to one consumer, and the server's CPU use
# 4. consumer overhead per batch (Next() to a device view), synthetic device ring
# 5. GPU memory of the server and consumers with 1 and 8 consumers (nvidia-smi)
set -u
B=${1:?build dir}
OUT=${2:?out dir}
PER=${3:-30}
DATA=/tmp/bc_bench_data
mkdir -p "$OUT"
S="$B/tools/batchcast-server"
wait_server() { for _ in $(seq 600); do "$S" stat "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
nproc
[ -d $DATA ] || timeout 300 python3 tools/make_dataset.py $DATA --classes 100 --per-class "$PER" \
  --seed 1 --quiet --workers 16
du -sh $DATA; find $DATA -name '*.JPEG' | wc -l
cat $DATA/*/* > /dev/null  # page cache: the benchmark measures decode, not the disk

echo "== pipeline (decode-only vs fill)"
timeout 150 "$B/benchmarks/gpu_pipeline_bench" $DATA --batch 256 --seconds 10 | tee "$OUT/pipeline.json"

echo "== server -> consumer, train 224 float16 nchw, batch 256"
"$S" serve $DATA --name bench --device cuda:0 --decode gpu --batch-size 256 --window 8 \
  --dtype float16 --layout nchw --transform train --size 224 --status-interval 0 \
  > /tmp/bench.server.log 2>&1 &
SPID=$!
wait_server bench
timeout 150 "$B/benchmarks/gpu_consumer_bench" bench --batch-size 256 --batches 600 \
  --server-pid $SPID --checksum | tee "$OUT/e2e.json"
"$S" stat bench | head -30
kill $SPID; wait $SPID

echo "== consumer overhead (synthetic ring on cuda:0, size 64)"
"$S" serve --synthetic 100000 --size 64 --name ovh --device cuda:0 --batch-size 256 --window 8 \
  --status-interval 0 > /tmp/ovh.server.log 2>&1 &
SPID=$!
wait_server ovh
for bs in 256 64 100; do
  timeout 120 "$B/benchmarks/gpu_consumer_bench" ovh --batch-size $bs --batches 2000 \
    --sleep-us 1000 | tee -a "$OUT/overhead.json"
done
timeout 120 "$B/benchmarks/gpu_consumer_bench" ovh --batch-size 256 --batches 3000 | tee -a "$OUT/overhead.json"
kill $SPID; wait $SPID

echo "== memory: 1 and 8 consumers (train 224 float16, batch 256, window 8)"
nvidia-smi --query-gpu=memory.used --format=csv,noheader | sed 's/^/idle: /'
"$S" serve $DATA --name mem --device cuda:0 --decode gpu --batch-size 256 --window 8 \
  --dtype float16 --status-interval 0 --min-consumers 1 > /tmp/mem.server.log 2>&1 &
SPID=$!
wait_server mem
sleep 2
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader | sed 's/^/server only: /'
for k in 1 8; do
  pids=()
  for i in $(seq $k); do
    "$B/benchmarks/gpu_consumer_bench" mem --batch-size 100 --batches 100 --linger-s 8 \
      > /tmp/mem.c$i.log 2>&1 &
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
