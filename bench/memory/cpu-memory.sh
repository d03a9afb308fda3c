#!/usr/bin/env bash
# The memory model against the trainer, on CPU ranks: for single-rank plans
# of the tiny models trained in fp32 (`dtype = f32`, as the trainer does),
# mistc's predicted peak (--emit=report) beside the peak of the memory the
# trainer's runtime allocated (its log, device::peakBytes). The same
# allocations happen on a GPU, plus the CUDA libraries' own workspaces.
#   cpu-memory.sh MISTC BUILD [OUT.json]
# Prints a table; writes OUT.json (default bench/results/memory-cpu.json).
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: cpu-memory.sh MISTC BUILD [OUT.json]" >&2; exit 2; }
mistc=$1 build=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${3:-$root/bench/results/memory-cpu.json}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for m in tiny-gpt tiny-llama; do
  sed 's/^train {$/train {\n  dtype = f32/' "$root/examples/$m.mist" > "$work/$m.mist"
done
# A larger one, closer to real proportions (fixed copies weigh less): about
# 35 s of CPU per step.
cat > "$work/small-gpt.mist" <<'MODEL'
import "gpt"
model small_gpt = gpt(vocab = 512, hidden = 256, layers = 4, heads = 4)
train {
  global_batch = 4
  seq_len = 256
  dtype = f32
  optimizer = adamw(lr = 1e-3, betas = (0.9, 0.95), weight_decay = 0.1)
}
MODEL
# name model G b ckpt offload-optimizer offload-activations [layers]
plans=(
  "gpt-b4 tiny-gpt 4 4 0 0 0"
  "gpt-b2-g8 tiny-gpt 8 2 0 0 0"
  "gpt-b4-ck1 tiny-gpt 4 4 1 0 0"
  "gpt-b4-ck2 tiny-gpt 4 4 2 0 0"
  "gpt-b4-oa50 tiny-gpt 4 4 0 0 0.5"
  "gpt-b4-oo50 tiny-gpt 4 4 0 0.5 0"
  "gpt-b16-g1 tiny-gpt 1 16 0 0 0"
  "llama-b4 tiny-llama 4 4 0 0 0"
  "small-b4 small-gpt 1 4 0 0 0 4"
)
printf '%-14s %12s %12s %8s\n' plan "predicted MiB" "measured MiB" error
echo "[" > "$out"
sep=""
for p in "${plans[@]}"; do
  read -r name model g b ck oo oa layers <<<"$p"
  "$root/scripts/single-gpu-plan.sh" "${layers:-2}" "$g" "$b" "$ck" "$oo" "$oa" > "$work/$name.yaml"
  predicted=$("$mistc" "$work/$model.mist" --cluster a100-40g --global-batch $((g * b)) \
    --plan "$work/$name.yaml" --emit=report | sed -n 's/^  peak \([0-9.]*\) MiB.*/\1/p')
  "$mistc" "$work/$model.mist" --cluster a100-40g --global-batch $((g * b)) \
    --plan "$work/$name.yaml" --emit=trainer -o "$work/$name.cu"
  "$root/scripts/compile-trainer.sh" cpu "$work/$name.cu" "$build" "$work/$name" > /dev/null
  measured=$(mpirun -np 1 "$work/$name" --steps 1 --log-every 1 |
    sed -n 's/.* \([0-9.]*\) MiB peak.*/\1/p' | tail -1)
  error=$(python3 -c "print(f'{($measured - $predicted) / $measured:+.1%}')")
  printf '%-14s %12s %12s %8s\n' "$name" "$predicted" "$measured" "$error"
  printf '%s  {"plan": "%s", "model": "%s", "grad_accum": %s, "micro_batch": %s, "ckpt_layers": %s, "offload_optimizer": %s, "offload_activations": %s, "predicted_peak_mib": %s, "measured_peak_mib": %s}' \
    "$sep" "$name" "$model" "$g" "$b" "$ck" "$oo" "$oa" "$predicted" "$measured" >> "$out"
  sep=$',\n'
done
printf '\n]\n' >> "$out"
echo "written $out"
