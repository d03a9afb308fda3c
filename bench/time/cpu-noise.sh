#!/usr/bin/env bash
# How much one CPU trainer's step time varies from process to process on
# this machine: the noise floor under bench/time/cpu-time.sh, whose
# prediction check compares one profiling process with one training process
# per plan. Builds the time check's first plan (a 4-layer GPT, hidden 128,
# seq 128, micro-batch 4, G 2, fp32, one rank) and runs it RUNS times (default
# 10), each the median over steps 2-STEPS of the logged step time.
#   cpu-noise.sh MISTC BUILD [OUT.json]
# Prints each run and the spread; writes OUT.json (default
# bench/results/cpu-noise.json). A timing: run it on an idle machine.
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: cpu-noise.sh MISTC BUILD [OUT.json]" >&2; exit 2; }
mistc=$1 build=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${3:-$root/bench/results/cpu-noise.json}
runs=${RUNS:-10} steps=${STEPS:-8}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cp "$root/bench/time/models/bench-gpt.mist" "$work/"
cat >"$work/plan.yaml" <<'PLAN'
mist_plan: 1
global_batch: 8
grad_accum: 2
stages:
  - layers: [0, 3]
    mesh: {nodes: 1, gpus_per_node: 1}
    micro_batch: 4
    dp: 1
    tp: 1
PLAN
"$mistc" "$work/bench-gpt.mist" --cluster a100-40g --plan "$work/plan.yaml" --emit=trainer \
  -o "$work/train.cu" 2>/dev/null
"$root/scripts/compile-trainer.sh" cpu "$work/train.cu" "$build" "$work/train" >/dev/null
times=()
for ((r = 1; r <= runs; r++)); do
  t=$(mpirun -np 1 "$work/train" --steps "$steps" --log-every 1 --synthetic 2>/dev/null |
    sed -n 's/^step *\([0-9]*\) .* \([0-9.]*\) tokens\/s .*/\1 \2/p' | python3 -c "
import statistics, sys
rates = [float(l.split()[1]) for l in sys.stdin if int(l.split()[0]) >= 2]
print(f'{1024 / statistics.median(rates):.4f}')")
  echo "run $r: $t s per step"
  times+=("$t")
done
python3 - "$out" "$runs" "$steps" "${times[@]}" <<'PY'
import json, statistics, sys
out, runs, steps, times = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), [float(t) for t in sys.argv[4:]]
med = statistics.median(times)
spread = (max(times) - min(times)) / med
worst = max(abs(t - med) / med for t in times)
print(f"{runs} processes: median {med:.4f} s per step, min {min(times):.4f}, max {max(times):.4f}: "
      f"spread {spread:.0%} of the median, worst run {worst:.0%} from it")
json.dump({"plan": "gpt-b4 of bench/time/cpu-time.sh (fp32, one rank)", "steps": steps,
           "seconds_per_step": times, "median": med, "spread_of_median": spread,
           "worst_from_median": worst}, open(out, "w"), indent=1)
PY
echo "written $out"
