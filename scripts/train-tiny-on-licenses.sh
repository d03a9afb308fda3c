#!/usr/bin/env bash
# Real training, reproducible with one command: the tiny GPT on 2 CPU ranks
# (dp = 2) over a byte-level token file of the license texts every Debian
# machine has (/usr/share/common-licenses). Builds mistc if needed, makes the
# token file, emits and builds train.cu, trains 1200 steps, keeps the log in
# bench/results/tiny-gpt-licenses.log and checks that the loss, from about
# ln(256) = 5.5, ends below 2.5 (mean of the last 10 logged steps).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build="${BUILD_DIR:-$root/build}"
[[ -x $build/bin/mistc ]] || "$root/scripts/build.sh"
work="$build/licenses-run"
mkdir -p "$work"
python3 "$root/scripts/make-tokens.py" --out "$work/licenses.bin"
cat >"$work/plan.yaml" <<'PLAN'
mist_plan: 1
global_batch: 16
grad_accum: 1
stages:
  - layers: [0, 1]
    mesh: {nodes: 1, gpus_per_node: 2}
    micro_batch: 8
    dp: 2
    tp: 1
PLAN
"$root/scripts/build-trainer.sh" "$build/bin/mistc" "$root/examples/tiny-gpt.mist" "$work/plan.yaml" \
  "$work/train"
log="$root/bench/results/tiny-gpt-licenses.log"
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  mpirun --oversubscribe -np 2 "$work/train" --data "$work/licenses.bin" --steps 1200 --lr 3e-3 \
  --log-every 10 --seed 1234 | tee "$log"
awk '/^step/ {n++; v[n] = $4} END {
  s = 0; for (i = n - 9; i <= n; ++i) s += v[i]; m = s / 10
  printf "first logged loss %.3f, mean of the last 10 logged losses %.3f\n", v[1], m
  exit !(v[1] > 3.0 && m < 2.5) }' "$log" | tee -a "$log"
