#!/usr/bin/env bash
# Every plan trains the same model: trains one model under several plans on
# CPU ranks under mpirun and checks each plan's per-step losses against the
# first plan's within 1e-5 relative, and its final checkpoint (parameters,
# fp32 master weights, Adam moments) within 1e-5 of the parameters' norm and
# 1e-3 of each tensor's (compare-checkpoints.py says why).
#   equivalence.sh MISTC MODEL.mist WORKDIR GLOBAL_BATCH PLAN...
# A plan is G/STAGE[/STAGE...]: G micro-batches per step, then the stages in
# order, each LAYERS:DP:TP:MICRO_BATCH[:CKPT_LAYERS[:ZERO[:OFFLOAD]]] with
# ZERO 0-3 (1: optimizer state, 2: + gradients, 3: + weights) and OFFLOAD
# the fractions W,G,O,A of weights, gradients, optimizer state and
# activations kept in host memory. Example: 4/1:2:1:2:1/1:1:2:4::2:0,0,0.5,0
# G@V interleaves: V model chunks per stage (virtual_stages), e.g. 4@2/2:1:1:4/2:1:1:4.
# G+sp (after any @V) turns on sequence parallelism (sequence_parallel), G+sel
# selective recomputation (selective_recompute), e.g. 4+sp+sel/4:1:2:4.
# Tolerances: LOSS_TOLERANCE (default 1e-5) bounds each step's loss relative
# to the first plan's, CKPT_MODEL_TOL / CKPT_TENSOR_TOL the checkpoints'
# (compare-checkpoints.py); the bf16 suites pass wider ones (CMakeLists.txt).
# TRAINER_FLAGS: more trainer flags for every plan (--overlap: the streams on
# threads of their own); MISTC_FLAGS: more mistc flags (--cluster NAME
# --nodes N for plans larger than the default cluster's 8 GPUs).
set -euo pipefail
mistc=$1 model=$2 work=$3 batch=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
tolerance=${LOSS_TOLERANCE:-1e-5}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
reference=""
for spec in "$@"; do
  IFS=/ read -r -a parts <<<"$spec"
  IFS=+ read -r -a knobs <<<"${parts[0]}"
  IFS=@ read -r g chunks <<<"${knobs[0]}"
  chunks=${chunks:-1} sp=false sel=false
  for knob in "${knobs[@]:1}"; do
    case $knob in
    sp) sp=true ;;
    sel) sel=true ;;
    *) echo "equivalence.sh: unknown plan knob '+$knob' in $spec" >&2; exit 2 ;;
    esac
  done
  name="g$g" ranks=0 first=0
  [[ $chunks == 1 ]] || name+="v$chunks"
  [[ $sp == false ]] || name+="sp"
  [[ $sel == false ]] || name+="sel"
  stages=""
  for stage in "${parts[@]:1}"; do
    IFS=: read -r layers dp tp b ckpt zero offload <<<"$stage"
    ckpt=${ckpt:-0} zero=${zero:-0} offload=${offload:-0,0,0,0}
    IFS=, read -r wo go oo ao <<<"$offload"
    name+="-l${layers}dp${dp}tp${tp}b${b}c${ckpt}z${zero}"
    [[ $offload == 0,0,0,0 ]] || name+="o${wo}_${go}_${oo}_${ao}"
    stages+="  - layers: [$first, $((first + layers - 1))]
    mesh: {nodes: 1, gpus_per_node: $((dp * tp))}
    micro_batch: $b
    dp: $dp
    tp: $tp
    ckpt_layers: $ckpt
    zero: {optimizer: $([[ $zero -ge 1 ]] && echo true || echo false), grads: $([[ $zero -ge 2 ]] && echo true || echo false), weights: $([[ $zero -ge 3 ]] && echo true || echo false)}
    offload: {weights: $wo, grads: $go, optimizer: $oo, activations: $ao}
"
    first=$((first + layers)) ranks=$((ranks + dp * tp))
  done
  printf 'mist_plan: 1\nglobal_batch: %s\ngrad_accum: %s\nvirtual_stages: %s\nsequence_parallel: %s\nselective_recompute: %s\nstages:\n%s' \
    "$batch" "$g" "$chunks" "$sp" "$sel" "$stages" >"$work/$name.yaml"
  # shellcheck disable=SC2086 # MISTC_FLAGS is a list of flags
  "$here/../../scripts/build-trainer.sh" "$mistc" "$model" "$work/$name.yaml" "$work/$name" ${MISTC_FLAGS:-}
  rm -rf "$work/$name.ckpt"
  # shellcheck disable=SC2086 # TRAINER_FLAGS is a list of flags
  timeout 300 mpirun --oversubscribe -np "$ranks" "$work/$name" --steps 3 --lr 3e-3 --log-every 1 \
    --ckpt-dir "$work/$name.ckpt" ${TRAINER_FLAGS:-} | awk '/^step/ {print $4}' >"$work/$name.losses"
  [[ $(wc -l <"$work/$name.losses") == 3 ]] || { echo "$name: expected 3 losses"; exit 1; }
  echo "$name ($ranks ranks): $(tr '\n' ' ' <"$work/$name.losses")"
  if [[ -z $reference ]]; then
    reference=$name
  else
    paste "$work/$reference.losses" "$work/$name.losses" | awk -v plan="$name" -v tol="$tolerance" '
      { d = $1 - $2; if (d < 0) d = -d; if (d > tol * $1) { print plan ": step " NR " loss " $2 " vs " $1; bad = 1 } }
      END { exit bad }'
    python3 "$here/compare-checkpoints.py" "$work/$reference.ckpt" "$work/$name.ckpt"
  fi
done
echo "all $# plans match the first within $tolerance"
