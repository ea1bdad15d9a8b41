#!/usr/bin/env bash
# cmake finds pybind11 from the interpreter it builds for (ctest:
# pybind11_lookup), without -Dpybind11_DIR: a pip-installed pybind11 (where
# Debian's pybind11-dev is there, a package of pip's layout made from its files
# on PYTHONPATH, since no package index is reached) is found even when
# Debian's is there too; the interpreter's own (the GPU host's pip one), or
# else Debian's, is found as the interpreter comes.
# Usage: check_pybind11.sh SOURCE_DIR PYTHON
set -euo pipefail
SRC=$1
PY=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "check_pybind11: $*" >&2; exit 1; }
DEBIAN=$(ls /usr/lib/cmake/pybind11/pybind11Config.cmake /usr/share/cmake/pybind11/pybind11Config.cmake 2>/dev/null | head -1 || true)
DEBIAN=${DEBIAN:+$(dirname "$DEBIAN")}
OWN=$("$PY" -m pybind11 --cmakedir 2>/dev/null || true)  # a real pip install
[ -n "$DEBIAN" ] || [ -n "$OWN" ] || fail "neither Debian's pybind11-dev nor a pybind11 of $PY"
GEN=(); command -v ninja >/dev/null && GEN=(-G Ninja)
run() {  # run NAME EXPECTED_DIR [env...]
  local name=$1 expected=$2; shift 2
  env "$@" cmake -S "$SRC/tests/install/pybind11_lookup" -B "$T/$name" "${GEN[@]}" \
    -DBATCHCAST_SOURCE_DIR="$SRC" -DPython3_EXECUTABLE="$PY" -DEXPECTED_DIR="$expected" \
    >"$T/$name.log" 2>&1 || { cat "$T/$name.log"; fail "$name"; }
  echo "ok: $name: $(grep -o 'pybind11 [^ ]* from .*' "$T/$name.log")"
}
if [ -n "$DEBIAN" ]; then
  # A pip install's layout: site/pybind11/{__main__.py, include/, share/cmake/pybind11/}.
  PKG=$T/site/pybind11
  mkdir -p "$PKG/share/cmake"
  cp -r "$DEBIAN" "$PKG/share/cmake/pybind11"
  ln -s "$(dirname "$DEBIAN")/../../include" "$PKG/include"
  : >"$PKG/__init__.py"
  cat >"$PKG/__main__.py" <<'PY'
import os, sys
if "--cmakedir" in sys.argv:
    print(os.path.join(os.path.dirname(os.path.abspath(__file__)), "share", "cmake", "pybind11"))
PY
  run pip-layout "$PKG/share/cmake/pybind11" PYTHONPATH="$T/site"
fi
if [ -n "$OWN" ]; then
  run interpreter "$OWN"
else
  run debian "$DEBIAN"
fi
