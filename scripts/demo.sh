#!/usr/bin/env bash
# The batchcast demo: two training jobs (a small CNN on the CPU, batch sizes
# 32 and 48) read the same JPEG folder, first each through its own torch
# DataLoader (1 worker each), then both through one batchcast server (2
# workers); prints images/s, the CPU each used, the speed-up, and the
# server's stats while the jobs run. Installs what is missing and builds
# first (minutes, once); the demo itself takes about half a minute.
# DATA=DIR uses another image folder; BUILD_DIR as in scripts/build.sh.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export BUILD_DIR=${BUILD_DIR:-$ROOT/build}
DATA=${DATA:-$ROOT/data/demo-1000}
"$ROOT/scripts/install-deps.sh"
[ -x "$BUILD_DIR/tools/batchcast-server" ] || echo "== building into $BUILD_DIR (the first time takes several minutes)"
"$ROOT/scripts/build.sh" >/dev/null
if [ ! -d "$DATA" ]; then
  PHOTOS=()
  [ -d "$ROOT/../shared/data/photos" ] && PHOTOS=(--photos "$ROOT/../shared/data/photos")
  echo "== making $DATA: 1000 JPEGs in 10 classes (tools/make_dataset.py)"
  /usr/bin/python3 "$ROOT/tools/make_dataset.py" "$DATA" --classes 10 --per-class 100 --quiet "${PHOTOS[@]}"
fi
OUT=$(mktemp -d "${TMPDIR:-/tmp}/batchcast-demo.XXXXXX")
BATCHCAST_BUILD_DIR=$BUILD_DIR /usr/bin/python3 "$ROOT/benchmarks/colocate.py" --demo \
  --data "$DATA" --out "$OUT"
cat <<EOF

== your own jobs on one server (README, "Several jobs on one GPU"):
   PYTHONPATH=$BUILD_DIR/python /usr/bin/python3 -m batchcast.launch $DATA --size 64 \\
       --each lr=0.1,0.2 -- /usr/bin/python3 examples/train_resnet.py --shared {name} --lr {lr} --steps 20
EOF
