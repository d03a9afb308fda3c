#!/usr/bin/env bash
# The one-call GPU verification: run on the GPU host from the repository root,
# after prepare.sh has run where mistc builds (carry bench/gpu/work). Each step
# has its own time limit and log, so a slow or failing step costs only itself:
#   env         the GPU, driver, toolkit, PyTorch, MPI and NCCL found there
#   build       the runtime-only tree (kernels, GPU ops, trainer, profiler, GPU tests)
#   gpu-tests   ctest -L gpu: every CUDA kernel against its CPU reference
#   tiny-match  the tiny GPT's trainer on the GPU against the same train.cu on a
#               CPU rank, 20 steps, loss by loss (tests/trainer/gpu-matches-cpu.sh)
#   trainers    GPT-3 single-GPU trainers (PLANS, default gpt13-b4 gpt13-b4-ck24):
#               measured iteration time and peak memory against mistc's prediction
#   torch-ref   the PyTorch reference step on the same card (bench/h100/pytorch_gpt.py)
#   profile     the cluster profiler (bench/h100/profile-h100.sh), when PROFILE=1
# Logs go to $OUT/logs.tgz (refreshed after every step), the one-line-per-step
# summary to $OUT/summary.txt, JSON results to $OUT/*.json.
#   bash bench/gpu/run-all.sh  (env: OUT, JOBS, PLANS, STEPS, PLAN_LIMIT, TORCH_REF, PROFILE,
#                               PROFILE_LIMIT, and profile-h100.sh's REPEATS)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=${OUT:-/tmp/gpu-out}
logs=/tmp/gpu-logs
build=$root/build-gpu
jobs=${JOBS:-$(nproc)}
plans=${PLANS:-gpt13-b4 gpt13-b4-ck24}
steps=${STEPS:-5}
mkdir -p "$out" "$logs"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 PYTHONUNBUFFERED=1
nvidia-smi -L >/dev/null 2>&1 || { echo "run-all.sh: no GPU here: skipped"; exit 77; }
[[ -f bench/gpu/work/tiny-gpt.train.cu ]] || {
  echo "run-all.sh: bench/gpu/work is missing: run bench/gpu/prepare.sh where mistc builds and carry it" >&2; exit 1; }

failed=0
step() { # step NAME LIMIT_S COMMAND...: runs it, logs it, records rc and seconds
  local name=$1 limit=$2 start rc; shift 2
  start=$(date +%s)
  echo "== $name (limit ${limit}s)"
  timeout --kill-after=10 "$limit" "$@" > "$logs/$name.log" 2>&1
  rc=$?
  [[ $rc -eq 0 ]] || failed=1
  printf '%-12s rc %-3s %4ss\n' "$name" "$rc" "$(( $(date +%s) - start ))" | tee -a "$out/summary.txt"
  tail -n 25 "$logs/$name.log"
  tar -C "$logs" -czf "$out/logs.tgz" .
}

step env 60 bash -c 'nvidia-smi; nvcc --version; cmake --version | head -1; mpirun --version | head -1;
  ls /usr/include/nccl.h /usr/lib/x86_64-linux-gnu/libnccl.so* 2>&1; nproc; free -g;
  python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())";
  cat bench/gpu/work/commit'
step build 300 bash -c "cmake -S . -B '$build' -G Ninja -DMIST_RUNTIME_ONLY=ON -DCMAKE_BUILD_TYPE=Release -DMIST_WERROR=OFF &&
  cmake --build '$build' -j$jobs"
step gpu-tests 180 ctest --test-dir "$build" -L gpu --output-on-failure --timeout 120 -j4
step tiny-match 120 tests/trainer/gpu-matches-cpu.sh bench/gpu/work/tiny-gpt.train.cu "$build" /tmp/tiny-match 20
trainers() { # each plan compiled and trained with its own time limit, logs as they run
  local t=/tmp/gpu-trainers p
  mkdir -p "$t/logs"
  python3 - bench/gpu/work/trainers/predicted.json "$t/predicted.json" $plans <<'PY'
import json, sys
keep = set(sys.argv[3:])
json.dump([p for p in json.load(open(sys.argv[1])) if p["plan"] in keep], open(sys.argv[2], "w"), indent=1)
PY
  for p in $plans; do
    scripts/compile-trainer.sh gpu "bench/gpu/work/trainers/$p.train.cu" "$build" "$t/$p" || continue
    echo "== $p"
    timeout --kill-after=5 "${PLAN_LIMIT:-60}" mpirun -np 1 "$t/$p" --steps "$steps" --log-every 1 \
      > "$logs/trainer-$p.log" 2>&1 || echo "   $p failed (rc $?)"
    cp "$logs/trainer-$p.log" "$t/logs/$p.log"
  done
  python3 bench/h100/summarize-trainers.py "$t/predicted.json" "$t/logs" "$out/gpu-trainer.json" \
    /nonexistent "$t/summary.json"
}
export -f trainers; export plans steps build out logs
step trainers 200 bash -c trainers
if [[ ${TORCH_REF:-1} == 1 ]]; then
  step torch-ref 150 python3 bench/h100/pytorch_gpt.py --model gpt3-1.3b --micro-batch 4 --mode eager \
    --steps 10 --warmup 3 --json "$out/torch-gpt13-b4-eager.json"
fi
if [[ ${PROFILE:-0} == 1 ]]; then
  step profile "${PROFILE_LIMIT:-300}" env BUILD="$build" OUT="$out/h100-80g-measured.yaml" bash bench/h100/profile-h100.sh
fi
echo
cat "$out/summary.txt"
exit $failed
