#!/usr/bin/env bash
# Issue 9's open measurements on the GPU host, one part per call of a device
# run (each under 10 minutes on an H100; each step has its own timeout and
# appends to LOG; the build is kept between the calls of one lease):
#   source .gpu-deps/env.sh && benchmarks/issue9_gpu_run.sh BUILD_DIR OUT_DIR PART
# with PART one of the parts below (PARTS).
# Each part first builds what its steps need (batchcast-server, gpu_pipeline_bench, _core).
# diagnosis (about 8 minutes):
#   decoder_interference.py: which part of nvJPEG costs a time-sliced trainer
#   (engine RGB, engine YUV, hybrid), at 3k and 7.4k images/s;
#   gpu_producer.py --paced --handoff: the fed trainer and its parts, MPS off;
#   then fed by a server with --nvjpeg-calls 2 and 3 (Note [Split hardware batch]).
# colocate (about 5 minutes): colocate.py, four ResNet-18 jobs, synthetic vs
#   batchcast (device cache off), MPS off and on (the issue's "four such jobs" row).
# coupling (about 4-5 minutes): fed_coupling.py, what slows the server's decode
#   beside the trainer it feeds (benchmarks/RESULTS.md, "What couples a fed
#   trainer to its server").
# trace (about 4 minutes): fed_coupling.py's reader_beside, pull_async and fed
#   with every server traced by benchmarks/cupti_trace.cc, then the decoder
#   alone (gpu_pipeline_bench --modes decode) with the files in pageable,
#   pinned and device memory (BC_TRACE_VARIANTS=OUTPUT:PIPELINE:INPUT ...
#   picks others, e.g. rgbi:off:pageable for --nvjpeg-pipeline off), traced
#   too; OUT/cupti.txt gets each trace's benchmarks/cupti_stats.py summary
#   ("Where the server's decode waits").
# loop (about 5 minutes): why the server's nvJPEG loop runs slower than the
#   bare decoder (asked in RESULTS.md, "nvJPEG waits once per image in every
#   setting", answered in "The pinned copy moves to the read-ahead
#   thread"; kept to check the loop again). The same files:
#   decode-only from page-locked and pageable memory, FillBatch alone (no
#   consumer) with 1 and 4 fallback threads, the server -> a reader process
#   (fed_coupling.py's reader run), server -> one Loader (gpu_producer.py),
#   and traces of decode-only and of FillBatch (OUT/cupti.txt): where the
#   host time per image goes inside the server but not outside it.
# mps (about 7 minutes): the fed trainer under MPS with one and with two
#   nvJPEG calls per batch (--nvjpeg-calls), five alternating pairs of 12 s
#   windows each: 8 s windows spread 0.77-1.01, 12 s ones 0.91-0.94
#   (RESULTS.md, "The pinned copy moves to the read-ahead thread"), where
#   the server is behind the trainer a third of the time.
# inproc (about 8 minutes): the fed trainer with the server in its own
#   process (gpu_producer.py --in-process: one CUDA context, no time slicing
#   between the server's decode and the trainer) beside the usual server
#   process, four alternating pairs of 10 s windows each; then in-process
#   only with --nvjpeg-calls 2. (The first call of this part compared
#   --gpu-priority normal and high: RESULTS.md, "The server in the
#   trainer's process"; BC_INPROC_PRIORITIES=normal,high does it again.)
# inproc_trace (about 7 minutes): where the fed trainer's and the server's
#   time goes when the server runs in the trainer's process, and, for
#   comparison, from its own process: each whole process traced by
#   benchmarks/cupti_trace.cc, one synthetic and one fed window each;
#   OUT/cupti_threads.txt gets cupti_stats.py --threads of every trace (per
#   thread: its calls, and how long the kernels it launched waited to start),
#   OUT/inproc_slice.txt.gz one second of the in-process fed window, raw.
#   Then, untraced, in process with CUDA_DEVICE_MAX_CONNECTIONS=32 beside
#   the default (8), three pairs each. (On the H100 the traced trainer ran
#   so slowly that both traced steps hit their limit before the fed window:
#   RESULTS.md, "Hardware queues".)
# queues (about 5 minutes): Note [Hardware queues]. gpu_producer.py with a
#   server process at CUDA's default 8 queues (decode-only, server -> one
#   Loader, the fed trainer, three pairs); the fed trainer with the server in
#   its process (32 queues, as batchcast.Server sets them).
# queues_mps (about 4 minutes): under MPS, the fed trainer from a server
#   process with 8 and with 32 queues (three pairs each; BC_QUEUES_ORDER="32 8"
#   the other way round).
# mps_parts (about 5 minutes): under MPS, where the fed trainer's last 5 %
#   go: fed pairs, then the trainer on synthetic data beside an nvJPEG
#   decode-only process and beside a FillBatch process, each paced at the
#   fed rate, then fed by a --synthetic server (the hand-off alone).
# inproc_parts (about 3 minutes; not run yet): the server in the trainer's
#   process (32 queues), fed pairs, then the trainer on synthetic data while
#   a thread of its process pulls from that server at the fed rate
#   (gpu_producer.py --paced with --in-process: PacedPuller).
# colocate_hosted (about 5 minutes): four ResNet-18 jobs, MPS off, fed by a
#   batchcast-server process and by the same server hosted in job 0's process
#   (colocate.py source "hosted": one CUDA context fewer to time-slice), next
#   to four jobs on synthetic data; twice, the second time in the other order.
# colocate_matrix (about 7 minutes): the same three sources for 1, 2, 4 and 8
#   ResNet-18 jobs, MPS off and on (colocate.py --budget 420 skips what does
#   not fit).
# region (about 6 minutes): Note [Region decode]. FillBatch alone (the
#   server's own rate and cores) with crop regions and whole images, twice
#   each, alternating; then the fed trainer with the server in its process,
#   three pairs with regions, three without.
# region_mps (about 5 minutes): the same fed trainer from a server process
#   under MPS, regions and whole images, three pairs each.
# region_loader (about 8 minutes): server process -> one Loader against the
#   decode-only reference of the same run, MPS off, regions on, off, on
#   (gpu_producer.py with its reference; one fed pair each).
# mps_share (about 5 minutes): the same under MPS with the server process's
#   and the trainer's share of the SMs capped (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE,
#   SERVER:TRAINER per run: 100:100 20:100 10:100, or BC_MPS_SHARES="..."),
#   three pairs each; a trainer's cap holds for its synthetic windows too.
# mps_batch (about 5 minutes): the fed trainer under MPS from a server process
#   with server batches of 256, 512 and 1024 (one nvJPEG call per batch: does
#   the call's own overhead count?), three pairs each; the Loader keeps 256.
#   BC_MPS_BATCHES="256 512 256 512" runs others (a run's folder: its place
#   in the list and its batch).
set -u
PARTS="diagnosis colocate coupling trace loop mps inproc inproc_trace queues queues_mps mps_parts inproc_parts colocate_hosted colocate_matrix region region_mps region_loader mps_share mps_batch"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${1:?build dir}
OUT=${2:?out dir}
PART=${3:?one of: $PARTS}
case " $PARTS " in *" $PART "*) ;; *) echo "issue9_gpu_run: part must be one of: $PARTS" >&2; exit 2;; esac
LOG=$OUT/log
DATA=/tmp/bc_gpu_producer_100x40
# Each step's folder (JSON and server logs) lies under W; only the JSONs and the
# end of each log come back in OUT (a device call returns at most 8 files).
W=/tmp/issue9_$PART
mkdir -p "$OUT"
cd "$ROOT" || exit 1
step() { local t=$1; shift; echo "== $* ($(date +%T))" >>"$LOG"; timeout "$t" "$@" >>"$LOG" 2>&1; local rc=$?; echo "== rc=$rc ($(date +%T))" >>"$LOG"; return $rc; }
nvidia-smi --query-gpu=name,driver_version --format=csv >>"$LOG" 2>&1
step 200 cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DPython3_EXECUTABLE="$(command -v python3)" -DBATCHCAST_BUILD_TESTS=OFF || exit 1
[ -d $DATA ] || { python3 tools/make_dataset.py $DATA --classes 100 --per-class 40 --seed 1 \
  --quiet --workers 6 >/tmp/issue9_dataset.log 2>&1 & }
step 330 cmake --build "$B" -j "$(nproc)" --target batchcast-server gpu_pipeline_bench _core || exit 1
wait
export BATCHCAST_BUILD_DIR=$B
# benchmarks/cupti_trace.cc as /tmp/libcupti_trace.so; clears the traces of an
# earlier call of this lease, which would be summarized (and named) too.
build_tracer() {
  local cupti inc
  cupti=$(find / -xdev -name 'libcupti.so*' 2>/dev/null | grep -v stub | head -1)
  inc=$(dirname "$(find / -xdev -name cupti.h 2>/dev/null | head -1)")
  rm -rf "$W"/cupti*
  step 60 g++ -O1 -shared -fPIC -I/usr/local/cuda/include -I"$inc" benchmarks/cupti_trace.cc \
    "$cupti" -Wl,-rpath,"$(dirname "$cupti")" -o /tmp/libcupti_trace.so
}
# The cupti_stats.py summary of trace FILE into OUT/cupti.txt under TITLE:
# summarize TITLE FILE (a FILE that is not there: a glob that found no trace).
summarize() {
  if [ -f "$2" ]; then
    { echo "== $1"; python3 benchmarks/cupti_stats.py "$2"; } >>"$OUT/cupti.txt" 2>&1
  else
    echo "== $1: no trace (the run failed before CUDA started?)" >>"$OUT/cupti.txt"
  fi
}
# gpu_pipeline_bench ARGS... traced into $W/cupti_NAME, summarized under TITLE:
# traced NAME TITLE ARGS...
traced() {
  local title=$2 d="$W/cupti_$1" t
  shift 2
  mkdir -p "$d"
  CUDA_INJECTION64_PATH=/tmp/libcupti_trace.so BC_CUPTI_DIR="$d" step 90 \
    "$B/benchmarks/gpu_pipeline_bench" $DATA "$@"
  for t in "$d"/cupti_*.txt; do summarize "$title" "$t"; done
}
bench() { step 90 "$B/benchmarks/gpu_pipeline_bench" $DATA "$@"; }
# gpu_producer.py into $W/NAME, 4 fallback threads, 3 s warm-up, 8 s windows:
# producer NAME ARGS...
producer() {
  local name=$1
  shift
  step 200 python3 benchmarks/gpu_producer.py --out "$W/$name" --data $DATA --workers 4 \
    --warmup 3 --measure 8 "$@"
}
if [ "$PART" = diagnosis ]; then
  step 220 python3 benchmarks/decoder_interference.py --out "$W/interference" --data $DATA
  step 150 python3 benchmarks/gpu_producer.py --out "$W/producer" --data $DATA --workers 4 \
    --no-reference --paced --handoff --warmup 3 --measure 8
  # Note [Split hardware batch]: the fed trainer with 2 and 3 nvJPEG calls per batch.
  for k in 2 3; do
    step 90 python3 benchmarks/gpu_producer.py --out "$W/producer_calls$k" --data $DATA \
      --workers 4 --no-reference --nvjpeg-calls $k --warmup 3 --measure 8
  done
elif [ "$PART" = coupling ]; then
  step 420 python3 benchmarks/fed_coupling.py --out "$W/coupling" --data $DATA
elif [ "$PART" = trace ]; then
  build_tracer || exit 1
  mkdir -p "$W/cupti"
  BC_SERVER_PREFIX="env CUDA_INJECTION64_PATH=/tmp/libcupti_trace.so BC_CUPTI_DIR=$W/cupti" \
    step 300 python3 benchmarks/fed_coupling.py --out "$W/trace" --data $DATA \
    --runs reader_beside,pull_async,fed
  # One server per run, in run order: each summary under its run's name.
  runs=(reader_beside pull_async fed); i=0
  for t in $(ls -tr "$W"/cupti/cupti_*.txt); do
    summarize "server of ${runs[$i]:-$i}" "$t"
    i=$((i + 1))
  done
  # The decoder alone (no trainer), the files in pageable, page-locked and
  # device memory: synchronizes per image in each (RESULTS.md, "nvJPEG waits
  # once per image in every setting"). OUTPUT:PIPELINE:INPUT; nv12 and yuv
  # are left out (three device copies per image instead of the kernel: "No
  # output format takes nvJPEG's per-image work away").
  for v in ${BC_TRACE_VARIANTS:-rgbi:on:pageable rgbi:on:pinned rgbi:on:device}; do
    IFS=: read -r o p i <<<"$v"
    traced "decode_${o}_${p}_${i}" "decode-only, output $o, pipeline $p, input $i" \
      --modes decode --seconds 4 --nvjpeg-output "$o" --nvjpeg-pipeline "$p" --nvjpeg-input "$i"
  done
elif [ "$PART" = loop ]; then
  for i in pinned pageable; do bench --modes decode --seconds 6 --nvjpeg-input $i; done
  for w in 1 4; do bench --modes fill --seconds 6 --workers $w; done
  step 120 python3 benchmarks/fed_coupling.py --out "$W/reader" --data $DATA --runs reader
  step 150 python3 benchmarks/gpu_producer.py --out "$W/producer" --data $DATA --workers 4 \
    --warmup 3 --measure 8
  build_tracer || exit 1
  traced decode "decode-only, input pinned" --modes decode --seconds 4 --nvjpeg-input pinned
  traced fill "FillBatch, 4 fallback threads" --modes fill --seconds 4 --workers 4
elif [ "$PART" = inproc ]; then
  step 330 python3 benchmarks/gpu_producer.py --out "$W/inproc" --data $DATA --workers 4 \
    --warmup 3 --measure 10 --repeat 4 --in-process "${BC_INPROC_PRIORITIES:-normal}"
  step 170 python3 benchmarks/gpu_producer.py --out "$W/inproc_calls2" --data $DATA --workers 4 \
    --warmup 3 --measure 10 --repeat 4 --in-process normal --in-process-only --no-reference \
    --nvjpeg-calls 2
elif [ "$PART" = inproc_trace ]; then
  build_tracer || exit 1
  for where in inproc process; do
    mkdir -p "$W/cupti_$where"
    if [ $where = inproc ]; then flags="--in-process normal --in-process-only"; else flags=""; fi
    CUDA_INJECTION64_PATH=/tmp/libcupti_trace.so BC_CUPTI_DIR="$W/cupti_$where" \
      step 150 python3 benchmarks/gpu_producer.py --out "$W/traced_$where" --data $DATA \
      --workers 4 --no-reference --warmup 3 --measure 6 --repeat 1 $flags
    for t in "$W/cupti_$where"/cupti_*.txt; do
      [ -f "$t" ] || continue
      { echo "== $where: $(basename "$t") ($(wc -l <"$t") lines)"
        python3 benchmarks/cupti_stats.py "$t" --threads --bin 2 --top 4; } \
        >>"$OUT/cupti_threads.txt" 2>&1
    done
  done
  # The trainer's trace (the biggest) of the in-process run: one second,
  # 3 s before its last record (inside the fed window), raw.
  t=$(ls -S "$W"/cupti_inproc/cupti_*.txt 2>/dev/null | head -1)
  if [ -n "$t" ]; then
    last=$(awk '$1 ~ /^[KMSRD]$/ && $2 > m {m = $2} END {printf "%.0f", m}' "$t")
    awk -v a=$((last - 4000000000)) -v b=$((last - 3000000000)) \
      '$1 == "T" || ($1 ~ /^[KMSRD]$/ && $2 >= a && $2 < b)' "$t" | gzip >"$OUT/inproc_slice.txt.gz"
  fi
  for c in 8 32; do
    CUDA_DEVICE_MAX_CONNECTIONS=$c step 150 python3 benchmarks/gpu_producer.py \
      --out "$W/inproc_conn$c" --data $DATA --workers 4 --no-reference --warmup 3 --measure 8 \
      --repeat 3 --in-process normal --in-process-only
  done
elif [ "$PART" = queues ]; then
  step 200 python3 benchmarks/gpu_producer.py --out "$W/process8" --data $DATA --workers 4 \
    --warmup 3 --measure 8 --repeat 3
  step 160 python3 benchmarks/gpu_producer.py --out "$W/inproc32" --data $DATA --workers 4 \
    --warmup 3 --measure 8 --repeat 3 --no-reference --in-process normal --in-process-only
elif [ "$PART" = queues_mps ]; then
  for q in ${BC_QUEUES_ORDER:-8 32}; do
    step 160 python3 benchmarks/gpu_producer.py --out "$W/mps$q" --data $DATA --workers 4 \
      --warmup 3 --measure 8 --repeat 3 --no-reference --mps on --hardware-queues $q
  done
elif [ "$PART" = mps_parts ]; then
  step 330 python3 benchmarks/gpu_producer.py --out "$W/mps_parts" --data $DATA --workers 4 \
    --warmup 3 --measure 8 --repeat 3 --no-reference --mps on --paced --handoff
elif [ "$PART" = inproc_parts ]; then
  step 240 python3 benchmarks/gpu_producer.py --out "$W/inproc_parts" --data $DATA --workers 4 \
    --warmup 3 --measure 8 --repeat 3 --no-reference --in-process normal --in-process-only --paced
elif [ "$PART" = colocate_hosted ]; then
  for order in synthetic,hosted,batchcast batchcast,hosted,synthetic; do
    step 200 python3 benchmarks/colocate.py --out "$W/colocate_${order%%,*}_first" \
      --models resnet18 --jobs 4 --sources $order --mps off --warmup 3 --measure 6 --data $DATA
  done
elif [ "$PART" = colocate_matrix ]; then
  step 470 python3 benchmarks/colocate.py --out "$W/colocate_matrix" --models resnet18 \
    --jobs 1,2,4,8 --sources synthetic,batchcast,hosted --mps off,on --warmup 2 --measure 4 \
    --budget 420 --data $DATA
elif [ "$PART" = region ]; then
  for r in on off on off; do
    if [ $r = on ]; then bench --modes fill --seconds 8 --workers 4 --nvjpeg-region
    else bench --modes fill --seconds 8 --workers 4 --no-nvjpeg-region; fi
  done
  for r in on off; do
    producer "inproc_region_$r" --repeat 3 --no-reference --in-process normal --in-process-only \
      --nvjpeg-region $r
  done
elif [ "$PART" = region_loader ]; then
  n=0
  for r in on off on; do
    n=$((n + 1))
    producer "loader_region_${n}_$r" --nvjpeg-region $r
  done
elif [ "$PART" = region_mps ]; then
  for r in on off; do
    producer "mps_region_$r" --repeat 3 --no-reference --mps on --nvjpeg-region $r
  done
elif [ "$PART" = mps_batch ]; then
  n=0
  for b in ${BC_MPS_BATCHES:-256 512 1024}; do
    n=$((n + 1))
    producer "mps_batch_${n}_$b" --repeat 3 --no-reference --mps on --server-batch $b
  done
elif [ "$PART" = mps_share ]; then
  for p in ${BC_MPS_SHARES:-100:100 20:100 10:100}; do
    producer "mps_share_${p%%:*}_${p##*:}" --repeat 3 --no-reference --mps on \
      --server-sm-share ${p%%:*} --trainer-sm-share ${p##*:}
  done
elif [ "$PART" = mps ]; then
  for k in 1 2; do
    step 240 python3 benchmarks/gpu_producer.py --out "$W/mps_calls$k" --data $DATA --workers 4 \
      --no-reference --mps on --nvjpeg-calls $k --warmup 3 --measure 12 --repeat 5
  done
else
  step 300 python3 benchmarks/colocate.py --out "$W/colocate" --models resnet18 --jobs 1,4 \
    --sources synthetic,batchcast --mps off,on --budget 280
fi
for d in "$W"/*/; do
  n=$(basename "$d")
  for j in "$d"*.json; do [ -f "$j" ] && cp "$j" "$OUT/$n.json"; done
  for l in "$d"*.log; do [ -f "$l" ] && { echo "== tail $l" >>"$LOG"; tail -n 15 "$l" >>"$LOG"; }; done
done
echo "issue9_gpu_run $PART: done" >>"$LOG"
