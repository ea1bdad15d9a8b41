#!/usr/bin/env bash
# Checks that C, C++ and CUDA files are formatted as the repository's
# .clang-format says, with clang-format 14 (Debian 12's `clang-format`; other
# major versions format some constructs differently, so they are refused).
#
#   scripts/check_format.sh                 every tracked file (CI: scripts/test.sh)
#   scripts/check_format.sh FILE...         these files
#   scripts/check_format.sh --staged        the staged version of every staged
#                                           file (the pre-commit hook, scripts/hooks/)
#   scripts/check_format.sh --fix [FILE...] reformats in place instead
#
# CLANG_FORMAT names the binary (default: clang-format-14 if present, else
# clang-format). Exits 1 and lists the files (with clang-format's diagnostics)
# when one is not clean.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
NEED=14
PATTERNS=('*.c' '*.cc' '*.cpp' '*.cxx' '*.h' '*.hh' '*.hpp' '*.cu' '*.cuh')

CLANG_FORMAT=${CLANG_FORMAT:-$(command -v clang-format-$NEED || command -v clang-format || true)}
if [ -z "$CLANG_FORMAT" ]; then
  echo "check_format: clang-format $NEED not found (Debian 12: apt install clang-format;" \
    "scripts/install-deps.sh installs it)" >&2
  exit 2
fi
version=$("$CLANG_FORMAT" --version)
major=$(sed -n 's/.*version \([0-9]*\)\..*/\1/p' <<<"$version")
if [ "$major" != "$NEED" ]; then
  echo "check_format: needs clang-format $NEED (Debian 12's), $CLANG_FORMAT is: $version" >&2
  echo "check_format: set CLANG_FORMAT to a clang-format $NEED binary" >&2
  exit 2
fi

mode=check
case "${1:-}" in
  --fix) mode=fix; shift ;;
  --staged) mode=staged; shift ;;
esac
files=()
if [ "$mode" = staged ]; then
  mapfile -t files < <(git diff --cached --name-only --diff-filter=ACMR -- "${PATTERNS[@]}")
elif [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(git ls-files -- "${PATTERNS[@]}")
fi
[ ${#files[@]} -gt 0 ] || exit 0

if [ "$mode" = fix ]; then
  exec "$CLANG_FORMAT" -i --style=file -- "${files[@]}"
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
if [ "$mode" = staged ]; then  # what is to be committed, not the work tree
  for f in "${files[@]}"; do
    git show ":$f" | "$CLANG_FORMAT" --dry-run --Werror --style=file --assume-filename="$f" \
      2>>"$log" || rc=1
  done
else
  "$CLANG_FORMAT" --dry-run --Werror --style=file -- "${files[@]}" 2>"$log" || rc=1
fi
if [ $rc -ne 0 ]; then
  head -c 20000 "$log" >&2
  echo "check_format: not formatted with clang-format $NEED (.clang-format):" >&2
  grep -o '^[^:]*:[0-9]*:[0-9]*: error' "$log" | cut -d: -f1 | sort -u | sed 's/^/  /' >&2
  echo "check_format: fix with scripts/check_format.sh --fix FILE..." >&2
  exit 1
fi
echo "check_format: ${#files[@]} file(s) clean (clang-format $NEED)"
