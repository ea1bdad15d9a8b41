#!/usr/bin/env bash
# Configures and builds batchcast into ${BUILD_DIR:-build} (Release with debug info),
# installs it into $BUILD_DIR/install and builds the examples against that install.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
JOBS=${JOBS:-$(nproc)}
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPython3_EXECUTABLE=/usr/bin/python3 -DCMAKE_INSTALL_PREFIX="$BUILD_DIR/install" >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
cmake --install "$BUILD_DIR" >/dev/null
cmake -S "$ROOT/examples" -B "$BUILD_DIR/examples" -G Ninja \
  -DCMAKE_PREFIX_PATH="$BUILD_DIR/install" >/dev/null
cmake --build "$BUILD_DIR/examples" -j "$JOBS"
