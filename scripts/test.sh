#!/usr/bin/env bash
# Installs what is missing (Debian packages), builds, checks the locking
# annotations with clang (scripts/check_thread_safety.sh), and runs every test:
# the GoogleTest suites and the short stress runs (tests/stress) through
# ctest, the Python suite through pytest, then the sanitizer builds
# (scripts/check_sanitizers.sh: ASan+UBSan over every ctest test, TSan over
# the scheduler, client, sources and engine tests; SANITIZERS=none skips them).
# GPU tests skip cleanly on a machine without a GPU. Prints how long each
# part took.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export BUILD_DIR=${BUILD_DIR:-$ROOT/build}
TIMES=()
part() {  # name, command...: runs it and records its time
  local name=$1 t0=$SECONDS; shift
  "$@"
  TIMES+=("$name $((SECONDS - t0)) s")
}
part install "$ROOT/scripts/install-deps.sh"
part build "$ROOT/scripts/build.sh"
part thread-safety "$ROOT/scripts/check_thread_safety.sh"
cd "$BUILD_DIR"
part ctest ctest --output-on-failure -j "${JOBS:-2}" --timeout 300
cd "$ROOT"
export BATCHCAST_BUILD_DIR="$BUILD_DIR"
part pytest env PYTHONPATH="$BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}" \
  /usr/bin/python3 -m pytest tests/python -q -p no:cacheprovider
if [ "${SANITIZERS:-address,thread}" != none ]; then
  part sanitizers "$ROOT/scripts/check_sanitizers.sh"
fi
echo "test.sh: every part passed: ${TIMES[*]}"
