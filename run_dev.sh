source .gpu-deps/env.sh; export BATCHCAST_PYTHON=$(command -v python3); L=$OUT/log; B=/tmp/b
s(){ t=$1; shift; echo "== $* $(date +%T)" >>$L; timeout $t "$@" >>$L 2>&1; echo "== rc=$? $(date +%T)" >>$L; }
s 150 cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES=90 -DPython3_EXECUTABLE=$(command -v python3)
s 330 cmake --build $B -j16
s 60 $B/tests/sources_test --gtest_filter='SplitDecode*:BackgroundTask*:Transcode*'
s 200 $B/tests/gpu/gpu_image_test
BATCHCAST_BUILD_DIR=$B PYTHONPATH=$B/python s 240 python3 benchmarks/gpu_producer.py --out $OUT/w4 --workers 4 --measure 10 --handoff --interference
grep -E "tests|OK|FAILED|rc=|Failure" $L | tail -30; tail -14 $L
for t in 1 2 3; do s 40 $B/benchmarks/gpu_pipeline_bench /tmp/bc_gpu_producer_100x40 --modes decode --seconds 5 --decode-threads $t; done
grep decode_only $L
