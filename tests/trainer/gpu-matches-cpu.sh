#!/usr/bin/env bash
# The GPU trainer computes what the CPU trainer computes: one emitted
# train.cu, compiled for CPU ranks and for a GPU (scripts/compile-trainer.sh),
# trained for STEPS steps from the same seed on synthetic data; every step's
# loss must agree within TOL relative (default 1e-2: bf16's tolerance, which
# the GPU path must meet; its fp32 GEMMs and atomics-summed norm should give
# far less). Exits 77 (skipped) where no GPU is usable.
#   gpu-matches-cpu.sh TRAIN.cu BUILD WORKDIR [STEPS [TOL]]
set -euo pipefail
[[ $# -ge 3 ]] || { echo "usage: gpu-matches-cpu.sh TRAIN.cu BUILD WORKDIR [STEPS [TOL]]" >&2; exit 2; }
train=$1 build=$2 work=$3 steps=${4:-20} tol=${5:-1e-2}
here=$(cd "$(dirname "$0")" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$work"
if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu-matches-cpu.sh: no GPU here (nvidia-smi -L fails): skipped"
  exit 77
fi
"$here/../../scripts/compile-trainer.sh" cpu "$train" "$build" "$work/train-cpu"
"$here/../../scripts/compile-trainer.sh" gpu "$train" "$build" "$work/train-gpu"
for kind in cpu gpu; do
  mpirun -np 1 --oversubscribe "$work/train-$kind" --steps "$steps" --log-every 1 --seed 7 \
    > "$work/$kind.log" 2>&1 || { cat "$work/$kind.log"; echo "the $kind trainer failed" >&2; exit 1; }
done
grep -h "^mistrt: training" "$work/gpu.log"
python3 - "$work/cpu.log" "$work/gpu.log" "$tol" <<'PY'
import re, sys
def losses(path):
    return [float(m.group(1)) for m in re.finditer(r"^step +\d+ +loss ([-\d.eE+naninf]+)", open(path).read(), re.M)]
cpu, gpu, tol = losses(sys.argv[1]), losses(sys.argv[2]), float(sys.argv[3])
if len(cpu) != len(gpu) or not cpu:
    sys.exit(f"step counts differ: cpu {len(cpu)}, gpu {len(gpu)}")
worst = 0.0
print(f"{'step':>4} {'cpu loss':>12} {'gpu loss':>12} {'rel diff':>10}")
for i, (c, g) in enumerate(zip(cpu, gpu), 1):
    rel = abs(g - c) / max(abs(c), 1e-12)
    worst = max(worst, rel)
    print(f"{i:>4} {c:12.6f} {g:12.6f} {rel:10.2e}")
print(f"worst relative difference {worst:.3e} (tolerance {tol:g})")
sys.exit(0 if worst <= tol else 1)
PY
