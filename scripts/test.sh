#!/usr/bin/env bash
# Every check and test, in two lanes sharing one build directory:
#
#   scripts/test.sh          both: the fast lane, then the full lane (CI: .ci/run)
#   scripts/test.sh --fast   the fast lane, a few minutes: installs what is
#                            missing (Debian packages), the C++ format
#                            (scripts/check_format.sh), the Python lint
#                            (scripts/check_python.sh: flake8, mypy), builds
#                            the GoogleTest suite of each library only
#                            (target unit_tests) and runs them (ctest label
#                            `unit`)
#   scripts/test.sh --full   the rest: builds everything (scripts/build.sh:
#                            tools, Python module, benchmarks, examples),
#                            checks the locking annotations with clang
#                            (scripts/check_thread_safety.sh), runs the other
#                            ctest tests (end-to-end suites with real processes,
#                            short stress runs, the installed package; label
#                            `unit` left out), the Python suite through pytest,
#                            then the sanitizer builds (scripts/check_sanitizers.sh:
#                            ASan+UBSan over every ctest test, TSan over the
#                            scheduler, client, sources and engine tests;
#                            SANITIZERS=none skips them)
#
# Builds with BATCHCAST_WERROR=ON: a compiler warning fails the run. GPU tests
# skip cleanly on a machine without a GPU. Prints how long each part took:
# wall time, CPU time of its processes (user + sys; on a shared machine the
# wall time grows with the load, the CPU time much less) and the load
# average at its end; then the lane's totals.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export BUILD_DIR=${BUILD_DIR:-$ROOT/build}
export BATCHCAST_WERROR=ON
case "${1:-}" in
  --fast) LANES=(fast) ;;
  --full) LANES=(full) ;;
  "") LANES=(fast full) ;;
  *) echo "usage: scripts/test.sh [--fast | --full]" >&2; exit 2 ;;
esac
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
lane() {  # name, function: runs the lane's parts, then prints its totals
  local name=$1 t0=$SECONDS c0
  cpu_s
  c0=$CPU
  TIMES=()
  "$2"
  cpu_s
  echo "test.sh: $name lane passed in $((SECONDS - t0)) s (CPU $((CPU - c0)) s): ${TIMES[*]}"
}
ctest_in_build() { (cd "$BUILD_DIR" && ctest --output-on-failure -j "${JOBS:-2}" --timeout 300 "$@"); }

fast_lane() {
  part install "$ROOT/scripts/install-deps.sh"
  part format "$ROOT/scripts/check_format.sh"
  part python-lint "$ROOT/scripts/check_python.sh"
  part build-unit "$ROOT/scripts/build.sh" unit_tests
  part unit ctest_in_build -L unit
}

full_lane() {
  if [ "${LANES[0]}" = full ]; then part install "$ROOT/scripts/install-deps.sh"; fi
  part build "$ROOT/scripts/build.sh"
  part thread-safety "$ROOT/scripts/check_thread_safety.sh"
  part ctest ctest_in_build -LE unit
  export BATCHCAST_BUILD_DIR="$BUILD_DIR"
  part pytest env PYTHONPATH="$BUILD_DIR/python${PYTHONPATH:+:$PYTHONPATH}" \
    /usr/bin/python3 -m pytest tests/python -q -p no:cacheprovider
  if [ "${SANITIZERS:-address,thread}" != none ]; then
    part sanitizers "$ROOT/scripts/check_sanitizers.sh"
  fi
}

T0=$SECONDS
for l in "${LANES[@]}"; do lane "$l" "${l}_lane"; done
if [ ${#LANES[@]} -gt 1 ]; then echo "test.sh: every lane passed in $((SECONDS - T0)) s"; fi
