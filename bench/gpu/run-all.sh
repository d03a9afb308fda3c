#!/usr/bin/env bash
# The one-call GPU verification: run on the GPU host from the repository root,
# after prepare.sh has run where mistc builds (carry bench/gpu/work). Each step
# has its own time limit and log, so a slow or failing step costs only itself:
#   env         the GPU, driver, toolkit, PyTorch, MPI and NCCL found there
#   build       the runtime-only tree (kernels, GPU ops, trainer, profiler, GPU tests)
#   gpu-tests   ctest -L gpu: every CUDA kernel against its CPU reference
#   kernels     mist-bench-kernels: the bf16 kernels at GPT-3 1.3B's layer shapes against
#               the H100's measured ceilings (% of ceiling per kernel, kernels.json)
#   tiny-match  the tiny GPT's trainer on the GPU against the same train.cu on a
#               CPU rank, 20 steps, loss by loss (tests/trainer/gpu-matches-cpu.sh);
#               also in bf16, a bf16 Llama, and a model with slice/concat and the
#               exact GELU (tiny-match-bf16, tiny-match-llama-bf16, tiny-match-fused)
#   torch-ref   the PyTorch reference step on the same card (bench/h100/pytorch_gpt.py,
#               micro-batch 4; TORCH_RUNS, default GPT-3 1.3B and 2.7B compiled: the
#               targets' reference; eager adds 15 s, "gpt3-1.3b:eager")
#   trainers    GPT-3 single-GPU trainers (PLANS): measured iteration time and peak
#               memory against mistc's prediction, and the speedup over torch.compile;
#               each trainer's measured last step region by region against the
#               report's regions (bench/h100/compare-regions.py)
#   profile     the cluster profiler (bench/h100/profile-h100.sh), when PROFILE=1
# Logs go to $OUT/logs.tgz (refreshed after every step), the one-line-per-step
# summary to $OUT/summary.txt, JSON results to $OUT/*.json (gpu-summary.json:
# speedup_vs_torch_compile, max_time_error, max_memory_error).
#   bash bench/gpu/run-all.sh  (env: OUT, WORK, JOBS, PLANS, STEPS, PLAN_LIMIT, TORCH_RUNS,
#                               PROFILE, PROFILE_LIMIT, profile-h100.sh's REPEATS)
# DRY_RUN=1 runs here without a GPU (CI: ctest gpu-run-all-dry-run): it checks
# that every file and tool a step needs is there, prints the commands instead
# of running them, and runs the trainer summary on the committed logs of the
# last GPU run, so a change to the trainer's log lines breaks CI, not a GPU run.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
dry=${DRY_RUN:-0}
out=${OUT:-/tmp/gpu-out}
work=${WORK:-$root/bench/gpu/work}
logs=/tmp/gpu-logs
build=$root/build-gpu
jobs=${JOBS:-$(nproc)}
# GPT-3 2.7B has head dim 80: its attention needs cuDNN (the fp32 kernels have 64 and 128).
plans=${PLANS:-gpt13-b4 gpt13-b8-sel gpt27-b4 gpt67-tuned gpt67-offload-all}
steps=${STEPS:-5}
# model:mode pairs; TORCH_RUNS="" runs none.
torchRuns=${TORCH_RUNS-gpt3-1.3b:compile gpt3-2.7b:compile}
mkdir -p "$out" "$logs"
: > "$out/summary.txt"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
if [[ $dry != 1 ]] && ! nvidia-smi -L >/dev/null 2>&1; then
  echo "run-all.sh: no GPU here: skipped (DRY_RUN=1 checks the plumbing)"; exit 77
fi

missing=0
need() { # need FILE...: every input a step reads must be there before the GPU time is spent
  for f in "$@"; do
    [[ -e $f ]] || { echo "run-all.sh: missing $f" >&2; missing=1; }
  done
}
need "$work/tiny-gpt.train.cu" "$work/tiny-gpt-bf16.train.cu" "$work/tiny-fused.train.cu" \
  "$work/tiny-llama-bf16.train.cu" "$work/trainers/predicted.json" tests/trainer/gpu-matches-cpu.sh \
  scripts/compile-trainer.sh bench/h100/pytorch_gpt.py bench/h100/summarize-trainers.py \
  bench/h100/profile-h100.sh bench/h100/gpt3-shapes.tsv
for p in $plans; do need "$work/trainers/$p.train.cu"; done
[[ $missing == 0 ]] || {
  echo "run-all.sh: run bench/gpu/prepare.sh where mistc builds and carry bench/gpu/work" >&2; exit 1; }

failed=0
step() { # step NAME LIMIT_S COMMAND...: runs it, logs it, records rc and seconds
  local name=$1 limit=$2 start rc; shift 2
  start=$(date +%s)
  echo "== $name (limit ${limit}s)"
  if [[ $dry == 1 ]]; then
    printf 'would run:' > "$logs/$name.log"; printf ' %q' "$@" >> "$logs/$name.log"; echo >> "$logs/$name.log"
    rc=0
  else
    timeout --kill-after=10 "$limit" "$@" > "$logs/$name.log" 2>&1
    rc=$?
  fi
  [[ $rc -eq 0 ]] || failed=1
  printf '%-12s rc %-3s %4ss\n' "$name" "$rc" "$(( $(date +%s) - start ))" | tee -a "$out/summary.txt"
  tail -n 25 "$logs/$name.log"
  tar -C "$logs" -czf "$out/logs.tgz" .
}

step env 60 bash -c 'nvidia-smi; nvcc --version; cmake --version | head -1; mpirun --version | head -1;
  ls /usr/include/nccl.h /usr/lib/x86_64-linux-gnu/libnccl.so* 2>&1; nproc; free -g;
  python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())";
  cat "$0"' "$work/commit"
# bf16 attention on cuDNN: PyTorch's cuDNN (the nvidia.cudnn package) and the frontend's
# headers prepare.sh copied (cmake/MistCudnn.cmake; without either, the fp32 kernels run).
cudnnRoot=$(python3 -c 'import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])' 2>/dev/null || true)
step build 300 bash -c "cmake -S . -B '$build' -G Ninja -DMIST_RUNTIME_ONLY=ON -DCMAKE_BUILD_TYPE=Release -DMIST_WERROR=OFF \
  -DMIST_CUDNN_FRONTEND_INCLUDE='$work/cudnn-frontend/include' -DMIST_CUDNN_ROOT='$cudnnRoot' &&
  cmake --build '$build' -j$jobs"
step gpu-tests 180 ctest --test-dir "$build" -L gpu --output-on-failure --timeout 120 -j4
step kernels 120 "$build/bin/mist-bench-kernels" --json "$out/kernels.json"
step tiny-match 120 tests/trainer/gpu-matches-cpu.sh "$work/tiny-gpt.train.cu" "$build" /tmp/tiny-match 20
# bf16: fp32 sums in another order (cuBLASLt, the GPU's reductions) move
# values across bf16 rounding boundaries, hence bf16's bound (the CPU bf16
# suites' 2e-4 is for one kind of arithmetic).
step tiny-match-bf16 120 tests/trainer/gpu-matches-cpu.sh "$work/tiny-gpt-bf16.train.cu" "$build" \
  /tmp/tiny-match-bf16 20 1e-3
step tiny-match-llama-bf16 120 tests/trainer/gpu-matches-cpu.sh "$work/tiny-llama-bf16.train.cu" \
  "$build" /tmp/tiny-match-llama-bf16 20 1e-3
# slice/concat (strided copies), partial rotary and the exact GELU, in fp32.
step tiny-match-fused 120 tests/trainer/gpu-matches-cpu.sh "$work/tiny-fused.train.cu" "$build" \
  /tmp/tiny-match-fused 20

for run in $torchRuns; do
  model=${run%%:*} mode=${run##*:}
  step "torch-$model-$mode" 200 python3 bench/h100/pytorch_gpt.py --model "$model" --micro-batch 4 \
    --mode "$mode" --steps 10 --warmup 3 --json "$logs/torch-$model-b4-$mode.json"
done
# The summary's reference: a list of pytorch_gpt.py's objects, as run-reference.sh writes.
python3 - "$out/pytorch-reference.json" "$logs"/torch-*.json <<'PY'
import json, os, sys
json.dump([json.load(open(p)) for p in sys.argv[2:] if os.path.exists(p)], open(sys.argv[1], "w"), indent=1)
PY

trainers() { # each plan compiled and trained with its own time limit, logs as they run
  local t=/tmp/gpu-trainers p rc=0
  mkdir -p "$t/logs"
  python3 - "$work/trainers/predicted.json" "$t/predicted.json" $plans <<'PY'
import json, sys
keep = set(sys.argv[3:])
json.dump([p for p in json.load(open(sys.argv[1])) if p["plan"] in keep], open(sys.argv[2], "w"), indent=1)
PY
  # Compiled side by side (one nvcc per trainer, the host has the cores), then run one by one.
  for p in $plans; do
    scripts/compile-trainer.sh gpu "$work/trainers/$p.train.cu" "$build" "$t/$p" \
      > "$logs/compile-$p.log" 2>&1 &
  done
  wait
  for p in $plans; do
    [[ -x $t/$p ]] || { echo "   $p did not compile"; cat "$logs/compile-$p.log"; rc=1; continue; }
    echo "== $p"
    # Not bound to one core (Open MPI's default for one rank): the host-side
    # work at start (initial values of billions of weights) uses every core.
    timeout --kill-after=5 "${PLAN_LIMIT:-120}" mpirun -np 1 --bind-to none "$t/$p" --steps "$steps" --log-every 1 \
      --trace "$logs/trace-$p.json" > "$logs/trainer-$p.log" 2>&1 || { echo "   $p failed (rc $?)"; rc=1; }
    cp "$logs/trainer-$p.log" "$t/logs/$p.log"
    # Region by region, the measured last step against the report's prediction
    # (for the card it ran on: an H200 has its own preset and report).
    local report=$work/trainers/$p.report
    [[ $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1) == *H200* &&
      -f $work/trainers/$p.h200.report ]] && report=$work/trainers/$p.h200.report
    [[ -f $logs/trace-$p.json ]] && python3 bench/h100/compare-regions.py "$report" \
      "$logs/trace-$p.json" "$logs/regions-$p.json" > "$logs/regions-$p.txt" 2>&1 && cat "$logs/regions-$p.txt"
  done
  python3 bench/h100/summarize-trainers.py "$t/predicted.json" "$t/logs" "$out/gpu-trainer.json" \
    "$out/pytorch-reference.json" "$out/gpu-summary.json"
  return $rc # a plan that did not train fails the step (the summary still lists it)
}
export -f trainers; export plans steps build out logs work
step trainers 300 bash -c trainers
# The per-kernel table and the region comparisons join the summary
# (gpu-summary.json, "kernels" and "regions").
if [[ $dry != 1 && -f $out/kernels.json && -f $out/gpu-summary.json ]]; then
  python3 - "$out/gpu-summary.json" "$out/kernels.json" "$logs" <<'PY'
import glob, json, os, sys
summary, kernels = (json.load(open(p)) for p in sys.argv[1:3])
summary["kernels"] = kernels["kernels"]
summary["empty_kernel_us"] = kernels.get("empty_kernel_us")
summary["regions"] = {os.path.basename(p)[len("regions-"):-len(".json")]: json.load(open(p))
                      for p in sorted(glob.glob(os.path.join(sys.argv[3], "regions-*.json")))}
json.dump(summary, open(sys.argv[1], "w"), indent=1)
PY
fi
if [[ ${PROFILE:-0} == 1 ]]; then
  step profile "${PROFILE_LIMIT:-300}" env BUILD="$build" OUT="$out/gpu-profile.yaml" \
    bash bench/h100/profile-h100.sh
fi
if [[ $dry == 1 ]]; then
  # The summary's parser on the last GPU run's logs: it must read them and
  # find the figures that run recorded (its gpt3-trainer.json).
  last=$(ls -d bench/results/gpu-*/ | sort | tail -1)
  python3 bench/h100/summarize-trainers.py "$last/gpt3-trainer.json" "$last" \
    "$out/gpu-trainer.json" "$last/pytorch-reference.json" "$out/gpu-summary.json" || failed=1
  python3 - "$last/gpt3-trainer.json" "$out/gpu-trainer.json" <<'PY' || failed=1
import json, sys
recorded, parsed = (json.load(open(p)) for p in sys.argv[1:])
assert [r["plan"] for r in recorded] == [r["plan"] for r in parsed], parsed
for r, p in zip(recorded, parsed):
    if "error" in r:  # a plan that did not train in that run: the same verdict
        assert p.get("error") == r["error"], (r, p)
        continue
    assert "error" not in p, p
    for key in ("iteration_s_median", "peak_memory_gib", "tflops"):
        assert abs(r[key] - p[key]) <= 1e-9 * abs(r[key]), (p["plan"], key, r[key], p[key])
print(f"dry run: the trainer summary reads the last GPU run's logs ({len(parsed)} plans, figures as recorded)")
PY
fi
echo
cat "$out/summary.txt"
exit $failed
