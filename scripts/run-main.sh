#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build, then
#  1. compile GPT-3 1.3B and print its parameter and cost summary;
#  2. tune a training plan for it on the built-in 8 x A100-40GB preset and
#     print the plan's predicted report;
#  3. emit train.cu for the tiny GPT on two data-parallel CPU ranks (the
#     trainer runs one-stage, tp = 1 plans so far), build it with the line
#     in its header and train it under mpirun for a few steps, printing the loss.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
build="${BUILD_DIR:-$root/build}"
mistc="$build/bin/mistc"
"$mistc" "$root/examples/gpt3-1.3b.mist" --emit=summary
echo
"$mistc" "$root/examples/gpt3-1.3b.mist" --cluster a100-40g --emit=plan -o "$build/gpt3-1.3b.plan.yaml"
echo "plan written to $build/gpt3-1.3b.plan.yaml"
echo
"$mistc" "$root/examples/gpt3-1.3b.mist" --cluster a100-40g --plan "$build/gpt3-1.3b.plan.yaml" --emit=report
echo
work="$build/main-job-trainer"
mkdir -p "$work"
echo "writing $work/train.cu and building it with the line in its header (scripts/build-trainer.sh)"
"$root/scripts/build-trainer.sh" "$mistc" "$root/examples/tiny-gpt.mist" \
  "$root/tests/trainer/tiny-gpt-2ranks.yaml" "$work/train"
# Open MPI refuses to start as root unless told it is meant.
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  mpirun --oversubscribe -np 2 "$work/train" --steps 30 --lr 3e-3 --log-every 5
