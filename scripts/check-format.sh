#!/usr/bin/env bash
# Checks that the project's tracked C++ and CUDA sources (git ls-files: *.cpp,
# *.h, *.cu, *.cuh) are formatted as the repository's .clang-format says,
# with clang-format-14 --dry-run --Werror. Prints every file that is not
# and exits 1; exits 0 when all are. Exits 77 (CTest: skipped) when
# clang-format-14 or git is missing, or the source is not a git checkout.
#
#   scripts/check-format.sh            list the unformatted files
#   scripts/check-format.sh --diff     also show what clang-format would change
#   scripts/check-format.sh FILE...    check only these files
#
# Fix a file with `clang-format-14 -i FILE`. CLANG_FORMAT overrides the
# binary (the version matters: other versions format some constructs
# differently). CTest runs this as the test `format-check` (label format).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
clang_format=${CLANG_FORMAT:-clang-format-14}

show_diff=0
if [[ ${1:-} == --diff ]]; then
  show_diff=1
  shift
fi

if ! command -v "$clang_format" >/dev/null 2>&1; then
  echo "check-format: $clang_format not found; skipped (scripts/setup.sh installs clang-format-14)" >&2
  exit 77
fi
cd "$root"
if (($# == 0)); then
  if ! command -v git >/dev/null 2>&1 || ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    echo "check-format: $root is not a git checkout; skipped (the file list comes from git ls-files)" >&2
    exit 77
  fi
  # No third-party sources are tracked; exclude them here if some ever are.
  mapfile -t files < <(git ls-files -- '*.cpp' '*.h' '*.cu' '*.cuh')
else
  files=("$@")
fi

checked=0
bad=()
for f in "${files[@]}"; do
  [[ -f $f ]] || continue # tracked, but deleted in the working tree
  checked=$((checked + 1))
  if ! "$clang_format" --style=file --dry-run --Werror "$f" >/dev/null 2>&1; then
    bad+=("$f")
  fi
done

if ((${#bad[@]} == 0)); then
  echo "check-format: $checked files formatted as .clang-format says ($clang_format)"
  exit 0
fi
echo "check-format: ${#bad[@]} of $checked files are not formatted as .clang-format says ($clang_format):"
for f in "${bad[@]}"; do
  echo "  $f"
  if ((show_diff)); then
    "$clang_format" --style=file "$f" | diff -u --label "$f" --label "$f (formatted)" "$f" - |
      sed 's/^/    /' || true
  fi
done
echo "check-format: fix with: $clang_format -i FILE... (or see the changes with $0 --diff)"
exit 1
