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

present=()
for f in "${files[@]}"; do
  [[ -f $f ]] && present+=("$f") # tracked, but maybe deleted in the working tree
done
checked=${#present[@]}
# One clang-format run for all files (a process per file took most of the
# time); it names each violation `FILE:LINE:COL: error: code should be
# clang-formatted`, and any other message (a file it cannot read or parse)
# is a failure of the check itself.
bad=()
if ((checked)); then
  report=$("$clang_format" --style=file --dry-run --Werror "${present[@]}" 2>&1 >/dev/null) || true
  mapfile -t bad < <(printf '%s\n' "$report" |
    sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' | sort -u)
  if ((${#bad[@]} == 0)) && [[ -n $report ]]; then
    echo "check-format: $clang_format failed: $report" >&2
    exit 1
  fi
fi

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
