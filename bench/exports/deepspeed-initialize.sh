#!/usr/bin/env bash
# DeepSpeed exports through deepspeed.initialize and one step on CPU ranks
# (deepspeed-initialize.py): the tiny GPT's plans with a pipeline and dp
# (4 ranks), tp and dp in one stage (4 ranks, AutoTP) and a pipeline of tp 2 x
# dp 2 with per-stage choices projected (8 ranks), and GPT-3 1.3B as tuned
# for one 8-GPU A100 node (8 ranks, a stand-in of its 24 layers).
#   deepspeed-initialize.sh MISTC OUT.txt [VENV]
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: deepspeed-initialize.sh MISTC OUT.txt [VENV]" >&2; exit 2; }
mistc=$1 out=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=${3:-${MIST_EXPORTS_VENV:-$root/.venv-exports}}
if ! "$venv/bin/python" -c "import deepspeed, transformers" 2>/dev/null; then
  echo "deepspeed-initialize.sh: no deepspeed and transformers in $venv: skipped"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() { # NAME LAYERS mistc-arguments...
  local name=$1 layers=$2
  shift 2
  "$mistc" "$@" --emit=deepspeed -o "$work/$name.json" 2>/dev/null
  echo "== $name"
  PYTHONWARNINGS=ignore "$venv/bin/python" "$root/bench/exports/deepspeed-initialize.py" \
    "$work/$name.json" --layers "$layers"
}
status=0
{
  run tiny-pp2-dp2 2 "$root/examples/tiny-gpt.mist" --cluster a100-40g \
    --plan "$root/bench/exports/initialize/tiny-pp2-dp2.yaml" || status=1
  run tiny-tp2-dp2 2 "$root/examples/tiny-gpt.mist" --cluster a100-40g \
    --plan "$root/bench/exports/initialize/tiny-tp2-dp2.yaml" || status=1
  run tiny-pp2-tp2-dp2 2 "$root/examples/tiny-gpt.mist" --cluster a100-40g \
    --plan "$root/tests/lit/driver/Inputs/two-stage-plan.yaml" || status=1
  run gpt13-tuned-1node 24 "$root/examples/gpt3-1.3b.mist" --cluster a100-40g || status=1
} 2>&1 | tee "$out"
grep -c ": ok$" "$out" | sed 's/$/ of 4 exports initialized and stepped/'
exit $status
