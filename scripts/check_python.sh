#!/usr/bin/env bash
# Python lint (CI: scripts/test.sh):
#   flake8 over every tracked Python file (python/, tests/, tools/,
#          benchmarks/, examples/, scripts/, setup.py; configuration: .flake8,
#          max line length 100);
#   mypy   type check of the package python/batchcast against the native
#          module's stubs (python/batchcast/_core.pyi); configuration:
#          [tool.mypy] in pyproject.toml (strict). Its cache goes to
#          ${BUILD_DIR:-build}/mypy-cache.
# Debian's flake8 and mypy under /usr/bin/python3 (scripts/install-deps.sh
# installs them); no network.
#
#   scripts/check_python.sh            both
#   scripts/check_python.sh --staged   flake8 over the staged version of the
#                                      staged Python files (the pre-commit
#                                      hook, scripts/hooks/)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
PY=/usr/bin/python3
for tool in flake8 mypy; do
  if ! "$PY" -m "$tool" --version >/dev/null 2>&1; then
    echo "check_python: $tool not found for $PY (Debian: apt install $tool;" \
      "scripts/install-deps.sh installs it)" >&2
    exit 2
  fi
done

if [ "${1:-}" = --staged ]; then
  rc=0
  while IFS= read -r f; do  # what is to be committed, not the work tree
    git show ":$f" | "$PY" -m flake8 --stdin-display-name="$f" - || rc=1
  done < <(git diff --cached --name-only --diff-filter=ACMR -- '*.py' '*.pyi')
  exit $rc
fi

mapfile -t files < <(git ls-files -- '*.py' '*.pyi')
"$PY" -m flake8 -- "${files[@]}"
echo "check_python: flake8: ${#files[@]} files clean"
mkdir -p "$BUILD_DIR"
"$PY" -m mypy --cache-dir "$BUILD_DIR/mypy-cache"
echo "check_python: mypy: python/batchcast clean"
