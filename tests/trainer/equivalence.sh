#!/usr/bin/env bash
# Every plan trains the same model: trains one model under several plans
# (dp:tp:micro_batch:grad_accum[:ckpt_layers[:zero]], zero 0, 1 or 2, global batch fixed) on CPU ranks under
# mpirun, and checks each plan's per-step losses against the first plan's
# within 1e-5 relative.
#   equivalence.sh MISTC MODEL.mist WORKDIR GLOBAL_BATCH LAYERS PLAN...
set -euo pipefail
mistc=$1 model=$2 work=$3 batch=$4 layers=$5
shift 5
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
reference=""
for spec in "$@"; do
  IFS=: read -r dp tp b g ckpt zero <<<"$spec"
  ckpt=${ckpt:-0} zero=${zero:-0}
  name="dp${dp}-tp${tp}-b${b}-g${g}-ckpt${ckpt}-zero${zero}"
  optimizer=$([[ $zero -ge 1 ]] && echo true || echo false)
  grads=$([[ $zero -ge 2 ]] && echo true || echo false)
  cat >"$work/$name.yaml" <<PLAN
mist_plan: 1
global_batch: $batch
grad_accum: $g
stages:
  - layers: [0, $((layers - 1))]
    mesh: {nodes: 1, gpus_per_node: $((dp * tp))}
    micro_batch: $b
    dp: $dp
    tp: $tp
    ckpt_layers: $ckpt
    zero: {optimizer: $optimizer, grads: $grads}
PLAN
  "$mistc" "$model" --cluster a100-40g --plan "$work/$name.yaml" --emit=trainer -o "$work/$name.cu"
  build=$(grep '^//   mpicxx' "$work/$name.cu" | sed "s|^//   ||;s| train.cu | $name.cu |;s|-o train|-o $name|")
  (cd "$work" && eval "$build")
  timeout 300 mpirun --oversubscribe -np "$((dp * tp))" "$work/$name" --steps 3 --lr 3e-3 --log-every 1 \
    | awk '/^step/ {print $4}' >"$work/$name.losses"
  [[ $(wc -l <"$work/$name.losses") == 3 ]] || { echo "$name: expected 3 losses"; exit 1; }
  echo "$name: $(tr '\n' ' ' <"$work/$name.losses")"
  if [[ -z $reference ]]; then
    reference=$work/$name.losses
  else
    paste "$reference" "$work/$name.losses" | awk -v plan="$name" '
      { d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * $1) { print plan ": step " NR " loss " $2 " vs " $1; bad = 1 } }
      END { exit bad }'
  fi
done
echo "all plans match the first within 1e-5"
