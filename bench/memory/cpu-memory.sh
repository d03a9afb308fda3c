#!/usr/bin/env bash
# The memory model against the trainer, on CPU ranks: for plans of the tiny
# models trained in fp32 and in bf16 (bf16 weights and activations, fp32
# masters and gradients: Megatron-LM's mixed precision) on one rank and on several (dp with each ZeRO stage, tp, a pipeline), mistc's
# predicted peak of every stage (--emit=report) beside the peak of the memory
# the trainer's runtime allocated (its log: the largest rank of each stage,
# device::peakBytes). The same
# allocations happen on a GPU, plus the CUDA libraries' own workspaces.
#   cpu-memory.sh MISTC BUILD [OUT.json]      (env QUICK=1: without the hidden-256 GPT)
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
  sed 's/^train {$/train {\n  dtype = bf16/' "$root/examples/$m.mist" > "$work/$m-bf16.mist"
done
# The tiny GPT with 4 and 6 layers, for interleaved pipelines (each stage's
# layers in 2 chunks).
for n in 4 6; do
  sed "s/layers = 2/layers = $n/" "$work/tiny-gpt.mist" > "$work/tiny-gpt-${n}l.mist"
  sed "s/layers = 2/layers = $n/" "$work/tiny-gpt-bf16.mist" > "$work/tiny-gpt-${n}l-bf16.mist"
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
sed 's/dtype = f32/dtype = bf16/;s/small_gpt/small_gpt_bf16/' "$work/small-gpt.mist" > "$work/small-gpt-bf16.mist"
# name model G b ckpt offload-optimizer offload-activations layers check [offload-grads]
# check: what the test (tests/trainer/memory-matches-model.sh) asks of a row:
#   exact  within 1% of the prediction
#   bound  at most the prediction: the model counts a second gradient buffer
#          that ZeRO-2's reduce-scatter keeps alive beside the next layer's
#          backward on a GPU; on CPU ranks the fold runs at once, so the two
#          never coexist; offloaded gradients likewise (their buffers are
#          counted for the backward's peak beside the forward's)
plans=(
  "gpt-b4 tiny-gpt 4 4 0 0 0 2 exact"
  "gpt-b2-g8 tiny-gpt 8 2 0 0 0 2 exact"
  "gpt-b4-ck1 tiny-gpt 4 4 1 0 0 2 exact"
  "gpt-b4-ck2 tiny-gpt 4 4 2 0 0 2 exact"
  "gpt-b4-oa50 tiny-gpt 4 4 0 0 0.5 2 exact"
  "gpt-b4-oo50 tiny-gpt 4 4 0 0.5 0 2 exact"
  "gpt-b4-og50 tiny-gpt 4 4 0 0 0 2 bound 0.5"
  "gpt-b4-ck2-all tiny-gpt 4 4 2 0.625 0.875 2 bound 0.375"
  "gpt-b16-g1 tiny-gpt 1 16 0 0 0 2 exact"
  "llama-b4 tiny-llama 4 4 0 0 0 2 exact"
  "small-b4 small-gpt 1 4 0 0 0 4 exact"
  "small-b4-oa50 small-gpt 2 4 0 0 0.5 4 exact"
  "gpt-b4-bf16 tiny-gpt-bf16 4 4 0 0 0 2 exact"
  "gpt-b4-ck1-bf16 tiny-gpt-bf16 4 4 1 0 0 2 exact"
  "gpt-b4-oa50-bf16 tiny-gpt-bf16 4 4 0 0 0.5 2 exact"
  "gpt-b4-oo50-bf16 tiny-gpt-bf16 4 4 0 0.5 0 2 exact"
  "llama-b4-bf16 tiny-llama-bf16 4 4 0 0 0 2 exact"
  "small-b4-bf16 small-gpt-bf16 1 4 0 0 0 4 exact"
)
# Several ranks: name model G b mesh (a stage per '|': dp,tp,zero[,layers])
# check [v [knobs]]; zero is the ZeRO stage (0-3), layers the stage's
# (default: the model's 2 split evenly), v the model chunks per stage
# (interleaved 1F1B), knobs a comma list of sp (sequence parallelism) and sel
# (selective recomputation).
# Each stage's largest rank against its prediction.
multi=(
  "gpt-dp2 tiny-gpt 2 4 2,1,0 exact"
  "gpt-dp2-zero1 tiny-gpt 2 4 2,1,1 exact"
  "gpt-dp2-zero2 tiny-gpt 2 4 2,1,2 bound"
  "gpt-dp2-zero3 tiny-gpt 2 4 2,1,3 bound"
  "gpt-tp2 tiny-gpt 4 4 1,2,0 exact"
  "gpt-pp2 tiny-gpt 4 4 1,1,0|1,1,0 exact"
  "gpt-dp2-zero1-bf16 tiny-gpt-bf16 2 4 2,1,1 exact"
  "gpt-dp2-zero3-bf16 tiny-gpt-bf16 2 4 2,1,3 bound"
  "gpt-tp2-bf16 tiny-gpt-bf16 4 4 1,2,0 exact"
  "gpt-pp2-bf16 tiny-gpt-bf16 4 4 1,1,0|1,1,0 exact"
  "gpt4-pp2-v2 tiny-gpt-4l 4 4 1,1,0,2|1,1,0,2 exact 2"
  "gpt4-pp2-v2-g8 tiny-gpt-4l 8 2 1,1,0,2|1,1,0,2 exact 2"
  "gpt4-pp2-v2-dp2-zero1 tiny-gpt-4l 4 2 2,1,1,2|2,1,1,2 exact 2"
  "gpt6-pp2-uneven-v2 tiny-gpt-6l 4 4 1,1,0,2|1,1,0,4 exact 2"
  "gpt4-pp2-v2-bf16 tiny-gpt-4l-bf16 4 4 1,1,0,2|1,1,0,2 exact 2"
  "gpt-tp2-sp tiny-gpt 4 4 1,2,0 exact 1 sp"
  "gpt-tp4-sp tiny-gpt 4 4 1,4,0 exact 1 sp"
  "gpt-dp2-tp2-sp-zero1 tiny-gpt 2 4 2,2,1 exact 1 sp"
  "gpt-pp2-tp2-sp tiny-gpt 4 4 1,2,0|1,2,0 exact 1 sp"
  "llama-tp2-sp tiny-llama 4 4 1,2,0 exact 1 sp"
  "gpt-tp2-sp-bf16 tiny-gpt-bf16 4 4 1,2,0 exact 1 sp"
  "gpt-sel tiny-gpt 4 4 1,1,0 exact 1 sel"
  "gpt-dp2-zero1-sel tiny-gpt 2 4 2,1,1 exact 1 sel"
  "gpt-tp2-sp-sel tiny-gpt 4 4 1,2,0 exact 1 sp,sel"
  "gpt-pp2-sel tiny-gpt 4 4 1,1,0|1,1,0 exact 1 sel"
  "llama-sel tiny-llama 4 4 1,1,0 exact 1 sel"
  "gpt-sel-bf16 tiny-gpt-bf16 4 4 1,1,0 exact 1 sel"
)
# A plan of several ranks: stages of their given layers, or splitting the
# 2 layers evenly.
multi_plan() { # G b mesh [v [knobs]]
  local g=$1 b=$2 mesh=$3 v=${4:-1} knobs=,${5:-}, stages first=0 dp tp z layers
  IFS='|' read -ra stages <<<"$mesh"
  IFS=, read -r dp tp z layers <<<"${stages[0]}"
  echo "mist_plan: 1"
  echo "global_batch: $((dp * g * b))"
  echo "grad_accum: $g"
  echo "virtual_stages: $v"
  [[ $knobs != *,sp,* ]] || echo "sequence_parallel: true"
  [[ $knobs != *,sel,* ]] || echo "selective_recompute: true"
  echo "stages:"
  for st in "${stages[@]}"; do
    IFS=, read -r dp tp z layers <<<"$st"
    layers=${layers:-$((2 / ${#stages[@]}))}
    echo "  - layers: [$first, $((first + layers - 1))]"
    echo "    mesh: {nodes: 1, gpus_per_node: $((dp * tp))}"
    echo "    micro_batch: $b"
    echo "    dp: $dp"
    echo "    tp: $tp"
    echo "    zero: {weights: $([[ $z -ge 3 ]] && echo true || echo false), grads: $([[ $z -ge 2 ]] && echo true || echo false), optimizer: $([[ $z -ge 1 ]] && echo true || echo false)}"
    first=$((first + layers))
  done
}
printf '%-20s %12s %12s %8s  %s\n' plan "predicted MiB" "measured MiB" error check
echo "[" > "$out"
sep=""
# measure NAME MODEL GLOBAL_BATCH RANKS CHECK DESCRIPTION-JSON: one row per
# stage (NAME/sI when the plan has several): the report's peak of the stage
# against the trainer's (its last line: the most any rank of the stage held).
measure() {
  local name=$1 model=$2 batch=$3 ranks=$4 check=$5 fields=$6 predicted measured error i row
  mapfile -t predicted < <("$mistc" "$work/$model.mist" --cluster a100-40g --global-batch "$batch" \
    --plan "$work/$name.yaml" --emit=report | sed -n 's/^  peak \([0-9.]*\) MiB.*/\1/p')
  "$mistc" "$work/$model.mist" --cluster a100-40g --global-batch "$batch" \
    --plan "$work/$name.yaml" --emit=trainer -o "$work/$name.cu" 2>/dev/null
  "$root/scripts/compile-trainer.sh" cpu "$work/$name.cu" "$build" "$work/$name" > /dev/null
  mapfile -t measured < <(mpirun -np "$ranks" --oversubscribe "$work/$name" --steps 1 --log-every 1 |
    sed -n 's/^mistrt: peak device memory by stage.*: //p' | tr ',' '\n' |
    sed -n 's/.*stage [0-9]* \([0-9.]*\) MiB.*/\1/p')
  if [[ ${#predicted[@]} -eq 0 || ${#predicted[@]} -ne ${#measured[@]} ]]; then
    echo "$name: ${#predicted[@]} predicted stages, ${#measured[@]} measured" >&2
    exit 1
  fi
  for i in "${!predicted[@]}"; do
    row=$name
    [[ ${#predicted[@]} -gt 1 ]] && row="$name/s$i"
    error=$(python3 -c "print(f'{(${measured[$i]} - ${predicted[$i]}) / ${measured[$i]}:+.1%}')")
    printf '%-20s %12s %12s %8s  %s\n' "$row" "${predicted[$i]}" "${measured[$i]}" "$error" "$check"
    printf '%s  {"plan": "%s", "stage": %s, "model": "%s", %s, "check": "%s", "predicted_peak_mib": %s, "measured_peak_mib": %s}' \
      "$sep" "$row" "$i" "$model" "$fields" "$check" "${predicted[$i]}" "${measured[$i]}" >> "$out"
    sep=$',\n'
  done
}
for p in "${plans[@]}"; do
  read -r name model g b ck oo oa layers check og <<<"$p"
  og=${og:-0}
  # QUICK=1 (the ctest): the tiny models only; the hidden-256 GPT takes most of the time.
  [[ ${QUICK:-0} == 1 && $model == small-gpt* ]] && continue
  "$root/scripts/single-gpu-plan.sh" "$layers" "$g" "$b" "$ck" "$oo" "$oa" "$og" > "$work/$name.yaml"
  measure "$name" "$model" $((g * b)) 1 "$check" "$(printf '"ranks": 1, "grad_accum": %s, "micro_batch": %s, "ckpt_layers": %s, "offload_optimizer": %s, "offload_activations": %s, "offload_grads": %s' "$g" "$b" "$ck" "$oo" "$oa" "$og")"
done
for p in "${multi[@]}"; do
  read -r name model g b mesh check v knobs <<<"$p"
  v=${v:-1}
  multi_plan "$g" "$b" "$mesh" "$v" "${knobs:-}" > "$work/$name.yaml"
  ranks=0
  IFS='|' read -ra stages <<<"$mesh"
  for st in "${stages[@]}"; do IFS=, read -r dp tp z layers <<<"$st"; ranks=$((ranks + dp * tp)); done
  IFS=, read -r dp tp z layers <<<"${stages[0]}"
  measure "$name" "$model" $((dp * g * b)) "$ranks" "$check" "$(printf '"ranks": %s, "grad_accum": %s, "micro_batch": %s, "mesh": "%s", "virtual_stages": %s, "sequence_parallel": %s, "selective_recompute": %s' "$ranks" "$g" "$b" "$mesh" "$v" "$([[ ,${knobs:-}, == *,sp,* ]] && echo true || echo false)" "$([[ ,${knobs:-}, == *,sel,* ]] && echo true || echo false)")"
done
printf '\n]\n' >> "$out"
echo "written $out"
