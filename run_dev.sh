source .gpu-deps/env.sh; export BATCHCAST_PYTHON=$(command -v python3); L=$OUT/log; B=/tmp/b
s(){ t=$1; shift; echo "== $* $(date +%T)" >>$L; timeout $t "$@" >>$L 2>&1; echo "== rc=$? $(date +%T)" >>$L; }
s 150 cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES=90 -DPython3_EXECUTABLE=$(command -v python3)
s 330 cmake --build $B -j16
s 60 $B/tests/sources_test --gtest_filter='SplitDecode*:BackgroundTask*'
BATCHCAST_BUILD_DIR=$B PYTHONPATH=$B/python s 240 python3 benchmarks/gpu_producer.py --out $OUT/w4 --workers 4 --measure 10 --handoff
s 90 $B/benchmarks/nvjpeg_fallback_probe /tmp/bc_gpu_producer_100x40 --seconds 3 --threads 1,4
s 150 $B/tests/gpu_image_test
tail -40 $L
