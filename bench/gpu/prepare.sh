#!/usr/bin/env bash
# Runs where mistc builds (not on the GPU host): writes everything the one-call
# GPU verification (run-all.sh) needs and cannot make there, since mistc does
# not build on the GPU host: the tiny GPT's train.cu for the GPU-against-CPU
# check, and the single-GPU GPT-3 trainers with their predictions
# (bench/h100/make-trainers.sh), and a copy of the cuDNN frontend's headers.
# All under bench/gpu/work/ (ignored by git): carry that folder to the GPU host.
#   prepare.sh MISTC        (env: WORK, another folder to write; CUDNN_FRONTEND_INCLUDE,
#                            the frontend's include folder, default /opt/cudnn-frontend/include)
set -euo pipefail
[[ $# -eq 1 ]] || { echo "usage: prepare.sh MISTC" >&2; exit 2; }
mistc=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
work=${WORK:-$root/bench/gpu/work}
rm -rf "$work" && mkdir -p "$work"
# One head of 64 dims: the CUDA attention kernels exist for head dims 64 and 128.
"$mistc" "$root/tests/trainer/tiny-gpt-1head.mist" --cluster a100-40g \
  --plan "$root/tests/trainer/tiny-gpt-1rank.yaml" --emit=trainer -o "$work/tiny-gpt.train.cu"
# The same in bf16 (fp32 masters): the GPU runs the bf16 kernels (attention
# on cuDNN where the build has it) and must match the CPU's bf16 run.
sed 's/dtype = f32/dtype = bf16/' "$root/tests/trainer/tiny-gpt-1head.mist" >"$work/tiny-gpt-bf16.mist"
"$mistc" "$work/tiny-gpt-bf16.mist" --cluster a100-40g \
  --plan "$root/tests/trainer/tiny-gpt-1rank.yaml" --emit=trainer -o "$work/tiny-gpt-bf16.train.cu"
# Slices of a fused q/k/v, a concat, partial rotary and the exact GELU
# (tests/trainer/Inputs/tiny-fused-4l.mist) with one 64-dim head: the GPU's
# strided copies (cudaMemcpy2DAsync) and exact-GELU kernels in a trainer.
sed 's/heads = 4)/heads = 1)/' "$root/tests/trainer/Inputs/tiny-fused-4l.mist" >"$work/tiny-fused.mist"
sed 's/^model: tiny_gpt$/model: tiny_fused_4l/; s/layers: \[0, 1\]/layers: [0, 3]/' \
  "$root/tests/trainer/tiny-gpt-1rank.yaml" >"$work/tiny-fused-1rank.yaml"
"$mistc" "$work/tiny-fused.mist" --cluster a100-40g --plan "$work/tiny-fused-1rank.yaml" \
  --emit=trainer -o "$work/tiny-fused.train.cu"
# The tiny Llama in bf16 (RMSNorm, RoPE, SwiGLU, grouped kv heads) with two
# 64-dim query heads sharing one kv head: the bf16 kernels of the Llama ops.
sed 's/hidden = 64, layers = 4, heads = 4, kv_heads = 2, ffn = 176/hidden = 128, layers = 4, heads = 2, kv_heads = 1, ffn = 352/' \
  "$root/tests/trainer/Inputs/tiny-llama-4l-bf16.mist" >"$work/tiny-llama-bf16.mist"
grep -q 'hidden = 128, layers = 4, heads = 2, kv_heads = 1' "$work/tiny-llama-bf16.mist" ||
  { echo "prepare.sh: tiny-llama-4l-bf16.mist changed: update the sed above" >&2; exit 1; }
sed 's/^model: tiny_gpt$/model: tiny_llama_4l/; s/layers: \[0, 1\]/layers: [0, 3]/' \
  "$root/tests/trainer/tiny-gpt-1rank.yaml" >"$work/tiny-llama-1rank.yaml"
"$mistc" "$work/tiny-llama-bf16.mist" --cluster a100-40g --plan "$work/tiny-llama-1rank.yaml" \
  --emit=trainer -o "$work/tiny-llama-bf16.train.cu"
"$root/bench/h100/make-trainers.sh" "$mistc" "$work/trainers"
# The cuDNN frontend's headers (header-only; bf16 attention on cuDNN), which the
# GPU host has no network to fetch: run-all.sh's build points CMake at this copy.
frontend=${CUDNN_FRONTEND_INCLUDE:-/opt/cudnn-frontend/include}
if [[ -f $frontend/cudnn_frontend.h ]]; then
  mkdir -p "$work/cudnn-frontend" && cp -r "$frontend" "$work/cudnn-frontend/include"
else
  echo "prepare.sh: no cuDNN frontend headers in $frontend (scripts/setup.sh fetches them, or set" \
    "CUDNN_FRONTEND_INCLUDE): the GPU host builds without cuDNN attention (fp32 kernels)" >&2
fi
git -C "$root" rev-parse HEAD > "$work/commit" 2>/dev/null || echo "not a git checkout" > "$work/commit"
echo "prepare.sh: wrote $work (carry it to the GPU host)"
