#!/usr/bin/env bash
# Installs what is missing (Debian packages), builds, checks the locking
# annotations with clang (scripts/check_thread_safety.sh), and runs every test:
# the GoogleTest suites through ctest and the Python suite through pytest.
# GPU tests skip cleanly on a machine without a GPU.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export BUILD_DIR=${BUILD_DIR:-$ROOT/build}
"$ROOT/scripts/install-deps.sh"
"$ROOT/scripts/build.sh"
"$ROOT/scripts/check_thread_safety.sh"
cd "$BUILD_DIR"
ctest --output-on-failure -j "${JOBS:-2}" --timeout 300
cd "$ROOT"
export BATCHCAST_BUILD_DIR="$BUILD_DIR"
export PYTHONPATH="$BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}"
/usr/bin/python3 -m pytest tests/python -q -p no:cacheprovider
