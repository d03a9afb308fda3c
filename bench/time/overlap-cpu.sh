#!/usr/bin/env bash
# What --overlap buys on CPU ranks: each plan's trainer runs with its streams
# in program order and with g2g, h2d and d2h on threads of their own
# (--overlap), alternately, REPEATS times each; the step time is the median
# over steps 2-N of tokens per step / the logged tokens/s, and the table
# gives the median of the runs' medians for both and their ratio. Plans where
# the schedule has something to overlap: dp 2 with ZeRO-1/2/3 (gradient
# reduce-scatters and weight gathers on g2g beside compute), offload of
# weights, optimizer state and activations on one rank (h2d/d2h beside
# compute), and a two-stage pipeline (p2p on g2g). The machine's cores bound
# the gain: a stream's thread needs a core that compute is not using, so the
# one-rank plans have the second core for their copies and the two-rank
# plans have none to spare. Run on an idle machine (a timing).
#   overlap-cpu.sh MISTC [OUT.json]     (env STEPS, default 6; REPEATS, default 3)
# Prints a table; writes OUT.json (default bench/results/overlap-cpu.json).
set -euo pipefail
[[ $# -ge 1 ]] || { echo "usage: overlap-cpu.sh MISTC [OUT.json]" >&2; exit 2; }
mistc=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${2:-$root/bench/results/overlap-cpu.json}
steps=${STEPS:-6} repeats=${REPEATS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# The GPT of bench/time/cpu-time.sh (bench/time/models/bench-gpt.mist), with
# 8 layers so that there are layers to prefetch and fold beside.
sed 's/layers = 4,/layers = 8,/' "$root/bench/time/models/bench-gpt.mist" >"$work/bench-gpt.mist"
# name ranks G b stages (a stage per '|': layers,dp,zero,w,o,a offload)
plans=(
  "dp2-zero1 2 1 4 8,2,1,0,0,0"
  "dp2-zero2 2 1 4 8,2,2,0,0,0"
  "dp2-zero3 2 1 4 8,2,3,0,0,0"
  "offload-w50 1 2 4 8,1,0,0.5,0,0"
  "offload-o50 1 2 4 8,1,0,0,0.5,0"
  "offload-a50 1 2 4 8,1,0,0,0,0.5"
  "pp2 2 4 2 4,1,0,0,0,0|4,1,0,0,0,0"
)
plan_yaml() { # G b stages
  local g=$1 b=$2 stages first=0 layers dp z w o a
  IFS='|' read -ra stages <<<"$3"
  IFS=, read -r layers dp z w o a <<<"${stages[0]}"
  printf 'mist_plan: 1\nglobal_batch: %s\ngrad_accum: %s\nstages:\n' $((g * b * dp)) "$g"
  for st in "${stages[@]}"; do
    IFS=, read -r layers dp z w o a <<<"$st"
    cat <<STAGE
  - layers: [$first, $((first + layers - 1))]
    mesh: {nodes: 1, gpus_per_node: $dp}
    micro_batch: $b
    dp: $dp
    tp: 1
    zero: {optimizer: $([[ $z -ge 1 ]] && echo true || echo false), grads: $([[ $z -ge 2 ]] && echo true || echo false), weights: $([[ $z -ge 3 ]] && echo true || echo false)}
    offload: {weights: $w, grads: 0, optimizer: $o, activations: $a}
STAGE
    first=$((first + layers))
  done
}
# median step seconds of one run: steps 2-N, tokens per step / tokens/s
step_seconds() {
  python3 -c '
import re, statistics, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("step ")]
tps = [float(re.search(r"\s([0-9.]+) tokens/s", l).group(1)) for l in lines[1:]]
print(statistics.median(float(sys.argv[2]) / t for t in tps))' "$1" "$2"
}
printf '%-14s %6s %12s %12s %8s\n' plan ranks "serial ms" "overlap ms" ratio
rows=()
for p in "${plans[@]}"; do
  read -r name ranks g b stages <<<"$p"
  plan_yaml "$g" "$b" "$stages" >"$work/$name.yaml"
  "$root/scripts/build-trainer.sh" "$mistc" "$work/bench-gpt.mist" "$work/$name.yaml" "$work/$name" \
    --global-batch "$(sed -n 's/^global_batch: //p' "$work/$name.yaml")" >/dev/null
  tokens=$(( $(sed -n 's/^global_batch: //p' "$work/$name.yaml") * 128 ))
  serial=() overlap=()
  for ((r = 0; r < repeats; ++r)); do
    for mode in serial overlap; do
      flag=()
      [[ $mode == overlap ]] && flag=(--overlap)
      mpirun --oversubscribe --bind-to none -np "$ranks" "$work/$name" --steps "$steps" --log-every 1 \
        --synthetic "${flag[@]}" >"$work/$name.$mode.$r.log"
      t=$(step_seconds "$work/$name.$mode.$r.log" "$tokens")
      if [[ $mode == serial ]]; then serial+=("$t"); else overlap+=("$t"); fi
    done
  done
  read -r s o ratio < <(python3 -c '
import statistics, sys
half = len(sys.argv) // 2
s = statistics.median(map(float, sys.argv[1:half + 1])); o = statistics.median(map(float, sys.argv[half + 1:]))
print(f"{s * 1e3:.2f} {o * 1e3:.2f} {o / s:.3f}")' "${serial[@]}" "${overlap[@]}")
  printf '%-14s %6s %12s %12s %8s\n' "$name" "$ranks" "$s" "$o" "$ratio"
  rows+=("{\"plan\": \"$name\", \"ranks\": $ranks, \"serial_step_ms\": $s, \"overlap_step_ms\": $o, \"overlap_over_serial\": $ratio, \"serial_runs_s\": [$(IFS=,; echo "${serial[*]}")], \"overlap_runs_s\": [$(IFS=,; echo "${overlap[*]}")]}")
done
{
  echo "{\"date\": \"$(date +%F)\", \"commit\": \"$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)\", \"cores\": $(nproc), \"steps\": $steps, \"repeats\": $repeats, \"plans\": ["
  sep="  "
  for row in "${rows[@]}"; do printf '%s%s' "$sep" "$row"; sep=$',\n  '; done
  echo
  echo "]}"
} >"$out"
echo "written $out"
