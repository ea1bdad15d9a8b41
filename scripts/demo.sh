#!/usr/bin/env bash
# The batchcast demo: installs what is missing, builds, generates a small
# ImageNet-like dataset, starts a server and two consumers with different
# batch sizes, and prints what each got, how fast, and the server's stats.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export BUILD_DIR=${BUILD_DIR:-$ROOT/build}
DATA=${DATA:-$ROOT/data/demo}
NAME=batchcast-demo-$$
"$ROOT/scripts/install-deps.sh"
"$ROOT/scripts/build.sh" >/dev/null
BIN=$BUILD_DIR/tools/batchcast-server
if [ ! -d "$DATA" ]; then
  PHOTOS=()
  [ -d "$ROOT/../shared/data/photos" ] && PHOTOS=(--photos "$ROOT/../shared/data/photos")
  /usr/bin/python3 "$ROOT/tools/make_dataset.py" "$DATA" --classes 10 --per-class 40 "${PHOTOS[@]}"
fi
echo "== server: $BIN serve $DATA --name $NAME --batch-size 64 --window 8 --size 224 --min-consumers 2 --epochs 2"
"$BIN" serve "$DATA" --name "$NAME" --batch-size 64 --window 8 --size 224 --min-consumers 2 \
  --epochs 2 --status-interval 2 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 100); do "$BIN" stat "$NAME" >/dev/null 2>&1 && break; sleep 0.1; done
"$BUILD_DIR/examples/consumer" "$NAME" --batch-size 32 --epochs 2 --join next_epoch &
C1=$!
"$BUILD_DIR/examples/consumer" "$NAME" --batch-size 48 --epochs 2 --join next_epoch &
C2=$!
sleep 1
echo "== server stats while running:"
"$BIN" stat "$NAME" || true
wait $C1 $C2
echo "== both consumers done; the server exits when the stream has ended"
wait $SERVER || true
trap - EXIT
