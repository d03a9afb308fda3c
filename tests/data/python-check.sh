#!/usr/bin/env bash
# Runs one of tests/data's checks against other projects' code with a
# Python that has what it needs: $MIST_TORCH_PYTHON, else the exports venv
# ($MIST_EXPORTS_VENV or .venv-exports, bench/exports/setup-venv.sh).
# Exits 77 (skipped) when that Python lacks MODULE.
#   python-check.sh MODULE CHECK.py ARGS...
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: python-check.sh MODULE CHECK.py ARGS..." >&2; exit 2; }
module=$1 check=$2
shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
python=${MIST_TORCH_PYTHON:-${MIST_EXPORTS_VENV:-$root/.venv-exports}/bin/python}
if ! "$python" -c "import $module" 2>/dev/null; then
  echo "python-check.sh: no Python with $module ($python): $(basename "$check") skipped"
  exit 77
fi
exec "$python" "$check" "$@"
