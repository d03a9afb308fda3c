#!/usr/bin/env bash
# train.cu never narrows a value silently: emitted trainers (fp32 and bf16,
# one rank, a pipeline, an interleaved pipeline) compile with conversion
# warnings as errors (-Wconversion: float/int narrowing, float to int), their
# runtime headers included (issue 46 item 3).
#   no-narrowing.sh MISTC WORK
set -euo pipefail
mistc=$1 work=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work"
mpi=$(mpicxx --showme:incdirs 2>/dev/null | tr ' ' '\n' | sed 's/^/-I/' | tr '\n' ' ')
check() { # NAME MODEL PLAN
  "$mistc" "$2" --cluster a100-40g --plan "$3" --emit=trainer -o "$work/$1.cu" 2>/dev/null
  # shellcheck disable=SC2086 # the include flags are words
  g++ -std=c++20 -DMIST_CPU -x c++ -I"$root" $mpi -fsyntax-only -Wconversion -Wno-sign-conversion \
    -Werror "$work/$1.cu" || { echo "$1: train.cu narrows a value"; exit 1; }
  echo "$1: no narrowing"
}
check gpt-1rank "$root/examples/tiny-gpt.mist" "$root/tests/trainer/tiny-gpt-1rank.yaml"
sed 's/^train {$/train {\n  dtype = bf16/' "$root/examples/tiny-llama.mist" > "$work/llama-bf16.mist"
check llama-bf16 "$work/llama-bf16.mist" "$root/tests/trainer/tiny-llama-1rank.yaml"
cat > "$work/interleaved.yaml" <<'PLAN'
mist_plan: 1
global_batch: 12
grad_accum: 4
virtual_stages: 2
stages:
  - {layers: [0, 3], mesh: {nodes: 1, gpus_per_node: 1}, micro_batch: 3, dp: 1, tp: 1}
  - {layers: [4, 11], mesh: {nodes: 1, gpus_per_node: 2}, micro_batch: 3, dp: 1, tp: 2}
PLAN
check interleaved "$root/tests/trainer/Inputs/tiny-gpt-12l.mist" "$work/interleaved.yaml"
