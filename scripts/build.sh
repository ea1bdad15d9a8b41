#!/usr/bin/env bash
# Configures and builds batchcast into ${BUILD_DIR:-build} (Release with debug info),
# installs it into $BUILD_DIR/install and builds the examples against that install.
#   scripts/build.sh                 everything
#   scripts/build.sh TARGET...       only these targets (no install, no examples)
# BATCHCAST_WERROR=ON (CI: scripts/test.sh) makes every compiler warning an
# error, the examples' included; OFF turns that off again; unset keeps what the
# build directory has.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
JOBS=${JOBS:-$(nproc)}
WERROR=() EXAMPLES_WERROR=()
case "${BATCHCAST_WERROR:-}" in
  ON) WERROR=(-DBATCHCAST_WERROR=ON) EXAMPLES_WERROR=("-DCMAKE_CXX_FLAGS=-Wall -Wextra -Werror") ;;
  OFF) WERROR=(-DBATCHCAST_WERROR=OFF) EXAMPLES_WERROR=(-DCMAKE_CXX_FLAGS=) ;;
  "") ;;
  *) echo "build.sh: BATCHCAST_WERROR must be ON or OFF" >&2; exit 2 ;;
esac
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPython3_EXECUTABLE=/usr/bin/python3 -DCMAKE_INSTALL_PREFIX="$BUILD_DIR/install" \
  "${WERROR[@]}" >/dev/null
if [ $# -gt 0 ]; then
  exec cmake --build "$BUILD_DIR" -j "$JOBS" --target "$@"
fi
cmake --build "$BUILD_DIR" -j "$JOBS"
cmake --install "$BUILD_DIR" >/dev/null
cmake -S "$ROOT/examples" -B "$BUILD_DIR/examples" -G Ninja \
  -DCMAKE_PREFIX_PATH="$BUILD_DIR/install" "${EXAMPLES_WERROR[@]}" >/dev/null
cmake --build "$BUILD_DIR/examples" -j "$JOBS"
