#!/usr/bin/env bash
# Installs what is missing (Debian packages), builds, checks the locking
# annotations with clang (scripts/check_thread_safety.sh), and runs every test:
# the GoogleTest suites and the short stress runs (tests/stress) through
# ctest, the Python suite through pytest, then the sanitizer builds
# (scripts/check_sanitizers.sh: ASan+UBSan over every ctest test, TSan over
# the scheduler, client, sources and engine tests; SANITIZERS=none skips them).
# GPU tests skip cleanly on a machine without a GPU. Prints how long each
# part took: wall time, CPU time of its processes (user + sys; on a shared
# machine the wall time grows with the load, the CPU time much less) and
# the load average at its end.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export BUILD_DIR=${BUILD_DIR:-$ROOT/build}
TIMES=()
CPU_FILE=$(mktemp)
trap 'rm -f "$CPU_FILE"' EXIT
CPU=0
cpu_s() {  # sets CPU: CPU seconds (user + sys) of the finished children so far
  times >"$CPU_FILE"  # in this shell: in a subshell, $(...), it would count none
  CPU=$(awk 'NR == 2 { for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); s += a[1] * 60 + a[2] } }
             END { printf "%d", s }' "$CPU_FILE")
}
part() {  # name, command...: runs it and records its wall and CPU time
  local name=$1 t0=$SECONDS c0; shift
  cpu_s
  c0=$CPU
  "$@"
  cpu_s
  local t="$name $((SECONDS - t0)) s (CPU $((CPU - c0)) s, load $(cut -d' ' -f1 /proc/loadavg))"
  TIMES+=("$t;")
  echo "test.sh: $t"
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
