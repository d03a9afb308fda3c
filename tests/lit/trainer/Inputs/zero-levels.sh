#!/usr/bin/env bash
# zero-levels.sh MISTC MODEL WORK: each of the 8 combinations of the zero
# flags on a dp 2 stage, through --emit=report, --emit=schedule and
# --emit=trainer; prints one line per combination and emit: ok, or the
# first error line.
mistc=$1 model=$2 work=$3
mkdir -p "$work"
for w in false true; do for g in false true; do for o in false true; do
  plan=$work/zero-$w-$g-$o.yaml
  cat >"$plan" <<PLAN
mist_plan: 1
global_batch: 16
grad_accum: 4
stages:
  - layers: [0, 1]
    mesh: {nodes: 1, gpus_per_node: 2}
    micro_batch: 2
    dp: 2
    tp: 1
    zero: {weights: $w, grads: $g, optimizer: $o}
PLAN
  for emit in report schedule trainer; do
    if out=$("$mistc" "$model" --cluster a100-40g --plan "$plan" --emit=$emit -o "$work/out" 2>&1); then
      echo "weights $w grads $g optimizer $o: $emit ok"
    else
      echo "weights $w grads $g optimizer $o: $emit $(grep -m1 'error:' <<<"$out" | sed "s|^$work/||")"
    fi
  done
done; done; done
