#!/usr/bin/env bash
# Runs where mistc builds (not on the GPU host): writes the single-GPU plans
# of the H100 trainer benchmark, their predicted iteration time and peak
# memory (mistc --emit=report with CLUSTER, by default the dgx-h100-80g preset
# cut to one GPU; use the measured profile once it exists), and each plan's
# train.cu, all under OUT (default bench/h100/trainers), for
# run-trainers.sh to build and run on the GPU host. With the default cluster
# each plan is also priced on the dgx-h200-141g preset (PLAN.h200.report,
# "on_h200" in predicted.json), for a run on an H200:
#   make-trainers.sh MISTC [OUT] [CLUSTER.yaml]
# Plans (sequence 2048, one GPU, dp = tp = 1) differ in micro-batch,
# checkpointed layers, optimizer-state offload and activation offload; the
# GPT-3 6.7B pair is the tuner's plan against the plan that offloads all
# optimizer state (the ZeRO-Offload-style baseline). The models train in
# DTYPE (default bf16, the examples' own: bf16 weights and activations on the
# bf16 kernels, fp32 masters and gradients; DTYPE=f32 for the fp32 trainers,
# TF32 GEMMs, of the first GPU runs).
set -euo pipefail
[[ $# -ge 1 ]] || { echo "usage: make-trainers.sh MISTC [OUT] [CLUSTER.yaml]" >&2; exit 2; }
mistc=$1
here=$(cd "$(dirname "$0")" && pwd) root=$(cd "$(dirname "$0")/../.." && pwd)
out=${2:-$here/trainers}
mkdir -p "$out"
cluster=${3:-$out/h100-1gpu.yaml}
h200=""
one_gpu() { # PRESET OUT.yaml: the preset, one GPU per node, one node
  sed -e 's/^gpus_per_node: 8$/gpus_per_node: 1/' -e "s/^name: $1\$/name: $1-1gpu/" \
    -e '/^  - {nodes: [0-9]*, gpus_per_node: [2-9]/d' "$root/stdlib/clusters/$1.yaml" > "$2"
}
if [[ $# -lt 3 ]]; then
  one_gpu dgx-h100-80g "$cluster"
  h200=$out/h200-1gpu.yaml
  one_gpu dgx-h200-141g "$h200"
fi
# Predict and emit the same dtype (written into each model's train section),
# so that the predictions describe what runs.
mkdir -p "$out/models"
dtype=${DTYPE:-bf16}
[[ $dtype == bf16 || $dtype == f32 ]] || { echo "make-trainers.sh: DTYPE is bf16 or f32" >&2; exit 2; }
for m in gpt3-1.3b gpt3-2.7b gpt3-6.7b; do
  sed "s/^train {\$/train {\n  dtype = $dtype/" "$root/examples/$m.mist" > "$out/models/$m.mist"
done
# name model layers G b ckpt offload-optimizer offload-activations
plans=(
  "gpt13-b4 gpt3-1.3b 24 1 4 0 0 0"
  "gpt13-b2-g2 gpt3-1.3b 24 2 2 0 0 0"
  "gpt13-b8-ck12 gpt3-1.3b 24 1 8 12 0 0"
  "gpt13-b4-ck24 gpt3-1.3b 24 1 4 24 0 0"
  "gpt13-b4-oo50 gpt3-1.3b 24 1 4 0 0.5 0"
  "gpt13-b4-oa25 gpt3-1.3b 24 1 4 0 0 0.25"
  "gpt27-b4 gpt3-2.7b 32 1 4 0 0 0"
  "gpt27-b2-g2 gpt3-2.7b 32 2 2 0 0 0"
  "gpt27-b4-ck16-oo100 gpt3-2.7b 32 1 4 16 1.0 0"
  "gpt67-offload-all gpt3-6.7b 32 1 8 32 1.0 0"
)
echo "[" > "$out/predicted.json"
sep=""
for p in "${plans[@]}"; do
  read -r name model layers g b ck oo oa <<<"$p"
  "$root/scripts/single-gpu-plan.sh" "$layers" "$g" "$b" "$ck" "$oo" "$oa" |
    sed "2i model: ${model//[-.]/_}\ncluster: $(basename "$cluster" .yaml)" > "$out/$name.yaml"
done
# GPT-3 1.3B at micro-batch 8 with selective recomputation (the norms' and
# GELU's outputs computed again before each layer's backward).
"$root/scripts/single-gpu-plan.sh" 24 1 8 0 0 0 |
  sed "2i model: gpt3_1_3b\ncluster: $(basename "$cluster" .yaml)\nselective_recompute: true" \
    > "$out/gpt13-b8-sel.yaml"
# The tuner's own plan for GPT-3 6.7B on one GPU.
"$mistc" "$out/models/gpt3-6.7b.mist" --cluster "$cluster" --global-batch 8 --emit=plan \
  -o "$out/gpt67-tuned.yaml" 2> "$out/gpt67-tuned.log" || { cat "$out/gpt67-tuned.log" >&2; exit 1; }
for plan in "$out"/*.yaml; do
  name=$(basename "$plan" .yaml)
  [[ $name == h100-1gpu || $name == h200-1gpu ]] && continue
  model=$(sed -n 's/^model: gpt3_\(.*\)$/\1/p' "$plan" | tr _ .)
  model=$out/models/gpt3-$model.mist
  report=$("$mistc" "$model" --cluster "$cluster" --plan "$plan" --emit=report 2>&1) || {
    echo "$report" >&2; exit 1; }
  echo "$report" > "$out/$name.report"
  iter=$(sed -n 's/^pipeline: iteration \([0-9.]*\) s.*/\1/p' <<<"$report")
  peak=$(sed -n 's/.*peak \([0-9.]*\) GiB (forward.*/\1/p;s/.*peak \([0-9.]*\) MiB (forward.*/\1 1024/p' <<<"$report" |
    awk '{print NF == 2 ? $1 / $2 : $1}' | sort -g | tail -1)
  "$mistc" "$model" --cluster "$cluster" --plan "$plan" --emit=trainer -o "$out/$name.train.cu"
  on_h200=""
  if [[ -n $h200 ]]; then # the same plan priced on the H200
    report=$("$mistc" "$model" --cluster "$h200" --plan "$plan" --emit=report 2>&1) || {
      echo "$report" >&2; exit 1; }
    echo "$report" > "$out/$name.h200.report"
    h200_iter=$(sed -n 's/^pipeline: iteration \([0-9.]*\) s.*/\1/p' <<<"$report")
    on_h200=", \"on_h200\": {\"predicted_iteration_s\": ${h200_iter:-null}, \"predicted_peak_gib\": ${peak:-null}}"
  fi
  printf '%s  {"plan": "%s", "model": "%s", "predicted_iteration_s": %s, "predicted_peak_gib": %s%s}' \
    "$sep" "$name" "$(basename "$model")" "${iter:-null}" "${peak:-null}" "$on_h200" >> "$out/predicted.json"
  sep=$',\n'
  printf '%-22s %-16s predicted %8s s/iter  %7s GiB\n' "$name" "$(basename "$model")" "${iter:-?}" "${peak:-?}"
done
printf '\n]\n' >> "$out/predicted.json"
