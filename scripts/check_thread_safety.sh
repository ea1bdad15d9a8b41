#!/usr/bin/env bash
# Clang's thread-safety analysis of the library code (core/src/mutex.h:
# BC_GUARDED_BY, BC_REQUIRES, BC_ACQUIRED_BEFORE, ...). Configures a separate
# clang build in ${BUILD_DIR:-build}-clang (no CUDA, Python bindings, tests or
# benchmarks; no optimization) with -Wthread-safety -Werror=thread-safety and
# builds the libraries and the tools only, so it stays quick. Fails on any
# finding: a guarded field used without its mutex, a REQUIRES not met, a lock
# order broken. BATCHCAST_WERROR=ON (scripts/test.sh sets it) makes clang's
# other warnings (-Wall -Wextra) errors too. Called by scripts/test.sh; needs
# clang (scripts/install-deps.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
CLANG_BUILD_DIR=${BUILD_DIR}-clang
JOBS=${JOBS:-$(nproc)}
CLANGXX=${CLANGXX:-clang++}
if ! command -v "$CLANGXX" >/dev/null; then
  echo "check_thread_safety: $CLANGXX not found (scripts/install-deps.sh installs clang)" >&2
  exit 1
fi
LAUNCHER=()
if command -v ccache >/dev/null; then LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S "$ROOT" -B "$CLANG_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_COMPILER="$CLANGXX" -DCMAKE_CXX_FLAGS_DEBUG=-O0 \
  -DCMAKE_CXX_FLAGS="-Wthread-safety -Werror=thread-safety" "${LAUNCHER[@]}" \
  -DBATCHCAST_WERROR="${BATCHCAST_WERROR:-OFF}" \
  -DBATCHCAST_WITH_CUDA=OFF -DBATCHCAST_BUILD_PYTHON=OFF -DBATCHCAST_BUILD_BENCHMARKS=OFF \
  -DBATCHCAST_BUILD_TESTS=OFF >/dev/null
cmake --build "$CLANG_BUILD_DIR" -j "$JOBS" --target \
  batchcast_core batchcast_sources batchcast_server batchcast_client batchcast-server
echo "check_thread_safety: clang -Wthread-safety found nothing"
