#!/usr/bin/env bash
# Behaviour unchanged across a change of the emitter or the runtime: runs the
# fp32 equivalence suites (tests/trainer/equivalence-plans.txt) with two mistc
# builds, each emitting its own train.cu and linking its own runtime, and
# compares every plan's per-step losses and final checkpoint (parameters,
# fp32 masters, Adam moments) between the two, exactly (tolerance 0).
#   compare-trainer-builds.sh OLD_MISTC NEW_MISTC WORK [OUT.txt]
# TRAINER_FLAGS (e.g. --overlap) is passed to every run of both. Prints a
# line per plan and a summary; OUT.txt gets the same. Exit 1 on a difference.
set -euo pipefail
[[ $# -ge 3 ]] || { echo "usage: compare-trainer-builds.sh OLD_MISTC NEW_MISTC WORK [OUT.txt]" >&2; exit 2; }
old=$1 new=$2 work=$3 out=${4:-/dev/null}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$work"
same=0 differ=0
report() { echo "$1" | tee -a "$out"; }
: >"$out"
report "compare-trainer-builds: $old against $new, TRAINER_FLAGS='${TRAINER_FLAGS:-}'"
while read -r suite model batch plans; do
  [[ $suite =~ ^[a-z] ]] || continue
  # shellcheck disable=SC2086 # the plans are words
  for build in old new; do
    mistc=$old
    [[ $build == new ]] && mistc=$new
    TRAINER_OPT=-O0 "$root/tests/trainer/equivalence.sh" "$mistc" \
      "$root/tests/trainer/Inputs/$model.mist" "$work/$build-$suite" "$batch" $plans \
      >"$work/$build-$suite.log" </dev/null # mpirun would read the plan list
  done
  for losses in "$work/old-$suite"/*.losses; do
    plan=$(basename "$losses" .losses)
    if cmp -s "$losses" "$work/new-$suite/$plan.losses" &&
      CKPT_MODEL_TOL=0 CKPT_TENSOR_TOL=0 python3 "$root/tests/trainer/compare-checkpoints.py" \
        "$work/old-$suite/$plan.ckpt" "$work/new-$suite/$plan.ckpt" >"$work/$suite-$plan.cmp" 2>&1; then
      same=$((same + 1))
      report "$suite $plan: identical losses ($(tr '\n' ' ' <"$losses")) and checkpoint"
    else
      differ=$((differ + 1))
      report "$suite $plan: DIFFERENT: losses $(tr '\n' ' ' <"$losses")| $(tr '\n' ' ' <"$work/new-$suite/$plan.losses")"
      sed 's/^/  /' "$work/$suite-$plan.cmp" | tee -a "$out"
    fi
  done
done <"$root/tests/trainer/equivalence-plans.txt"
report "$same plans identical, $differ different"
((differ == 0))
