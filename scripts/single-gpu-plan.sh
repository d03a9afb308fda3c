#!/usr/bin/env bash
# Prints a one-stage plan on one GPU (dp = tp = 1), the shape the single-GPU
# benchmarks and the profiler's shape lists use:
#   single-gpu-plan.sh LAYERS GRAD_ACCUM MICRO_BATCH [CKPT_LAYERS [OFFLOAD_OPT [OFFLOAD_ACT [OFFLOAD_GRADS]]]]
# (global batch = GRAD_ACCUM x MICRO_BATCH; no ZeRO; weights stay on the GPU).
set -euo pipefail
[[ $# -ge 3 && $# -le 7 ]] || {
  echo "usage: single-gpu-plan.sh LAYERS GRAD_ACCUM MICRO_BATCH [CKPT_LAYERS [OFFLOAD_OPT [OFFLOAD_ACT [OFFLOAD_GRADS]]]]" >&2
  exit 2; }
layers=$1 g=$2 b=$3 ckpt=${4:-0} oo=${5:-0.0} oa=${6:-0.0} og=${7:-0.0}
cat <<PLAN
mist_plan: 1
global_batch: $((g * b))
grad_accum: $g
stages:
  - layers: [0, $((layers - 1))]
    mesh: {nodes: 1, gpus_per_node: 1}
    micro_batch: $b
    dp: 1
    tp: 1
    zero: {weights: false, grads: false, optimizer: false}
    ckpt_layers: $ckpt
    offload: {weights: 0.0, grads: $og, optimizer: $oo, activations: $oa}
PLAN
