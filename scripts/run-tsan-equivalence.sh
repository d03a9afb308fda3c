#!/usr/bin/env bash
# Race freedom of the overlapped schedule on CPU ranks: builds the runtime
# with ThreadSanitizer into build-tsan/ (-DMIST_RUNTIME_ONLY=ON
# -DMIST_SANITIZE_THREAD=ON) and trains equivalence plans with --overlap (the
# g2g, h2d and d2h streams on threads of their own) linked against it. Any
# race TSan sees in the runtime fails the plan (exit 66); each plan must also
# give the reference's losses and checkpoint within 1e-5, as in the
# equivalence suites. Open MPI is not instrumented: scripts/tsan-suppressions.txt
# leaves out reports inside it, never in this project's code.
#
#   scripts/run-tsan-equivalence.sh MISTC [OUT.json]
#
# MISTC: a normal build's mistc (it only emits train.cu). Environment:
# TSAN_BUILD_DIR (default build-tsan/), JOBS, ALL=1 (all 41 plans of
# tests/trainer/equivalence-plans.txt instead of the default 10, which cover
# ZeRO-2's per-region folds and ZeRO-3's prefetches on g2g, offload of each
# kind on h2d/d2h, tp, and pipelines with their p2p on g2g).
# Writes OUT.json (default bench/results/tsan-equivalence.json).
set -euo pipefail
[[ $# -ge 1 ]] || { echo "usage: run-tsan-equivalence.sh MISTC [OUT.json]" >&2; exit 2; }
mistc=$(realpath "$1")
root=$(cd "$(dirname "$0")/.." && pwd)
out=${2:-$root/bench/results/tsan-equivalence.json}
build=${TSAN_BUILD_DIR:-$root/build-tsan}
jobs=${JOBS:-$(nproc)}
cmake -S "$root" -B "$build" -G Ninja -DMIST_RUNTIME_ONLY=ON -DMIST_SANITIZE_THREAD=ON \
  -DMIST_WERROR=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" >/dev/null
cmake --build "$build" -j "$jobs" --target mistrtTrainer mistrtOps mistrtTensor mistrtDeviceHost \
  mistrtComm mistrtData mistrtCheckpoint mistKernelsCpu mistKernelsRef mistSchedule mistFormat

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 suppressions=$root/scripts/tsan-suppressions.txt"
# One thread per rank for the ops: the OpenMP runtime is not instrumented.
export TRAINER_BUILD=$build TRAINER_CXXFLAGS=-fsanitize=thread TRAINER_OPT=-O1
export TRAINER_FLAGS="--overlap --threads 1"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
declare -A plans
if [[ ${ALL:-0} == 1 ]]; then
  while read -r name model batch rest; do
    plans[$name]="$model $batch $rest"
  done < <(grep '^[a-z]' "$root/tests/trainer/equivalence-plans.txt")
else
  plans[gpt]="tiny-gpt-4l 16 4/4:1:1:4 4/4:2:1:2:0:2 4/4:2:1:2:0:3 4/4:2:2:2:1:3
    4/4:1:1:4:0:0:0.5,0,0,0 4/4:1:1:4:0:0:0,0.5,0,0 4/4:1:1:4:0:0:0,0,0.5,0
    4/4:2:1:2:1:3:0.3,0.3,0.3,0.3 4/2:2:2:2:0:1/2:1:2:4
    4/2:2:1:2:0:3:0,0,0.5,0/2:1:2:4:1:0:0,0,0,0.5"
fi
status=pass
rows=()
for suite in "${!plans[@]}"; do
  read -r -a words <<<"${plans[$suite]}"
  model=${words[0]} batch=${words[1]}
  log=$work/$suite.log
  start=$(date +%s)
  if "$root/tests/trainer/equivalence.sh" "$mistc" "$root/tests/trainer/Inputs/$model.mist" \
    "$work/$suite" "$batch" "${words[@]:2}" </dev/null >"$log" 2>&1; then
    result=pass
  else
    result=fail status=fail
  fi
  grep -E '^(g[0-9]|all |WARNING|SUMMARY)' "$log" || true
  [[ $result == pass ]] || tail -n 40 "$log"
  rows+=("{\"suite\": \"$suite\", \"plans\": $((${#words[@]} - 2)), \"result\": \"$result\", \"seconds\": $(($(date +%s) - start))}")
done
{
  echo "{\"date\": \"$(date +%F)\", \"commit\": \"$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)\","
  echo " \"flags\": \"$TRAINER_FLAGS\", \"sanitizer\": \"thread\", \"suites\": ["
  sep="  "
  for row in "${rows[@]}"; do printf '%s%s' "$sep" "$row"; sep=$',\n  '; done
  echo
  echo " ], \"result\": \"$status\"}"
} >"$out"
echo "tsan equivalence: $status (written $out)"
[[ $status == pass ]]
