#!/usr/bin/env bash
# The export check as a test (ctest exports-framework-check): runs
# check-exports.py with the frameworks of VENV (setup-venv.sh), and with
# Megatron-LM's own argument parser when MEGATRON_LM names a checkout of
# NVIDIA/Megatron-LM (not committed here). Exits 77 (skipped) without VENV.
#   run-check.sh MISTC OUT.json [VENV]
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: run-check.sh MISTC OUT.json [VENV]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=${3:-${MIST_EXPORTS_VENV:-$root/.venv-exports}}
if ! "$venv/bin/python" -c "import deepspeed, megatron.core, torchtitan" 2>/dev/null; then
  echo "run-check.sh: no frameworks in $venv (bench/exports/setup-venv.sh installs them): skipped"
  exit 77
fi
args=(--mistc "$1" --out "$2")
[[ -n ${MEGATRON_LM:-} ]] && args+=(--megatron-lm "$MEGATRON_LM")
PYTHONWARNINGS=ignore "$venv/bin/python" "$root/bench/exports/check-exports.py" "${args[@]}" 2> "$2.log"
