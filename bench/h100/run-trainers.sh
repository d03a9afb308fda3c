#!/usr/bin/env bash
# Runs on the GPU host (CUDA, NCCL, MPI; no compiler dependencies needed):
# builds the runtime-only tree, compiles every train.cu that make-trainers.sh
# wrote (carry bench/h100/trainers to the host), trains each for STEPS steps
# on synthetic data, and writes bench/results/h100-trainer.json plus a table:
# measured median iteration time and peak device memory against mistc's
# prediction, and the GPT-3 6.7B tuned plan against the all-optimizer-offload
# baseline. bench/results/h100-summary.json combines it with the PyTorch
# reference (run-reference.sh) when that has run. Exits 77 without a GPU.
#   run-trainers.sh [STEPS]      (env: BUILD, default build-gpu; TRAINERS)
set -euo pipefail
steps=${1:-6}
root=$(cd "$(dirname "$0")/../.." && pwd)
trainers=${TRAINERS:-$root/bench/h100/trainers}
build=${BUILD:-$root/build-gpu}
nvidia-smi -L >/dev/null 2>&1 || { echo "run-trainers.sh: no GPU here: skipped"; exit 77; }
[[ -f $trainers/predicted.json ]] || {
  echo "run-trainers.sh: $trainers/predicted.json is missing: run make-trainers.sh where mistc builds" >&2; exit 1; }
cmake -S "$root" -B "$build" -DMIST_RUNTIME_ONLY=ON -DCMAKE_BUILD_TYPE=Release > "$build.cmake.log"
cmake --build "$build" --target mistrtTrainer mistrtTrainerCuda -j"$(nproc)" > "$build.build.log"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
logs=$trainers/logs
mkdir -p "$logs"
for cu in "$trainers"/*.train.cu; do
  name=$(basename "$cu" .train.cu)
  "$root/scripts/compile-trainer.sh" gpu "$cu" "$build" "$logs/$name" > /dev/null
  echo "== $name"
  # A plan that does not fit is a result: the log keeps the out-of-memory message.
  mpirun -np 1 "$logs/$name" --steps "$steps" --log-every 1 > "$logs/$name.log" 2>&1 ||
    echo "   $name failed (rc $?): see $logs/$name.log"
done
python3 "$root/bench/h100/summarize-trainers.py" "$trainers/predicted.json" "$logs" \
  "$root/bench/results/h100-trainer.json" "$root/bench/results/h100-pytorch-reference.json" \
  "$root/bench/results/h100-summary.json"
