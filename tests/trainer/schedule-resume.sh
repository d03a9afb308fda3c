#!/usr/bin/env bash
# The learning-rate schedule is part of the run (issue 24): a run of 4 steps
# resumed with --steps 8 continues the 4-step schedule (its lr stays at the
# floor, 0.1 lr) and says so; with --reschedule it takes the 8-step schedule
# and says that; --steps 0 --ckpt-dir writes the initial weights, from which
# a resumed run trains exactly as a fresh one.
#   schedule-resume.sh MISTC MODEL.mist PLAN.yaml WORKDIR
set -euo pipefail
mistc=$1 model=$2 plan=$3 work=$4
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
"$(cd "$(dirname "$0")/../.." && pwd)/scripts/build-trainer.sh" "$mistc" "$model" "$plan" "$work/train"
run() { mpirun -np 1 --oversubscribe "$work/train" --log-every 1 --seed 5 "$@"; }
lrOf() { sed -n "s/^step *$1 .* lr \([^ ]*\) .*/\1/p" "$2"; }
lossOf() { sed -n "s/^step *$1 *loss \([^ ]*\) .*/\1/p" "$2"; }
fail() { echo "schedule-resume.sh: $*" >&2; exit 1; }

rm -rf "$work/a" "$work/b" "$work/zero"
run --steps 4 --ckpt-dir "$work/a" > "$work/first.log"
cp -r "$work/a" "$work/b"
run --steps 8 --ckpt-dir "$work/a" --resume > "$work/continued.log"
grep -q "continuing the checkpoint's schedule (lr 0.001, warmup 0, 4 steps), not this run's (lr 0.001, warmup 0, 8 steps); --reschedule uses this run's" "$work/continued.log" ||
  fail "the resumed run did not say it continues the checkpoint's schedule"
[[ $(lrOf 5 "$work/continued.log") == 0.0001 && $(lrOf 8 "$work/continued.log") == 0.0001 ]] ||
  fail "after the 4-step schedule's end the lr must stay at its floor 0.0001, not $(lrOf 5 "$work/continued.log")"

run --steps 8 --ckpt-dir "$work/b" --resume --reschedule > "$work/rescheduled.log"
grep -q "reschedule: this run's schedule (lr 0.001, warmup 0, 8 steps) replaces the checkpoint's (lr 0.001, warmup 0, 4 steps)" "$work/rescheduled.log" ||
  fail "--reschedule did not say it replaces the schedule"
run --steps 8 > "$work/straight.log"
[[ $(lrOf 5 "$work/rescheduled.log") == "$(lrOf 5 "$work/straight.log")" ]] ||
  fail "--reschedule's step 5 lr $(lrOf 5 "$work/rescheduled.log") is not the 8-step schedule's $(lrOf 5 "$work/straight.log")"

run --steps 0 --ckpt-dir "$work/zero" > "$work/zero.log"
grep -q "checkpoint of step 0 written" "$work/zero.log" || fail "--steps 0 wrote no checkpoint"
run --steps 8 --ckpt-dir "$work/zero" --resume > "$work/from-zero.log"
for s in 1 8; do
  [[ $(lossOf $s "$work/from-zero.log") == "$(lossOf $s "$work/straight.log")" ]] ||
    fail "from the step-0 checkpoint, step $s loss $(lossOf $s "$work/from-zero.log") differs from a fresh run's $(lossOf $s "$work/straight.log")"
done
echo "schedule-resume.sh: schedules survive resume; --reschedule and the step-0 checkpoint work"
