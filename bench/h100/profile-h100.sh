#!/usr/bin/env bash
# Measures the H100 machine for mistc's performance model and writes its cluster file,
# stdlib/clusters/h100-80g-measured.yaml (docs/cluster.md, "Profiling a cluster"):
# builds the runtime-only tree with the profiler (tools/profiler, no compiler
# dependencies), then runs mist-profile on the ops of bench/h100/gpt3-shapes.tsv
# (GPT-3 1.3B and 2.7B, one GPU, micro-batch 1-8; made here by make-shapes.sh, since
# mistc does not build on the GPU host), starting from the h100-80g preset for what
# one GPU cannot measure (the 8-GPU and multi-node collective table, p2p, host memory).
#
# On the GPU machine, from anywhere:
#   bash bench/h100/profile-h100.sh
# Environment: BUILD (build-rt: the runtime-only build folder), SHAPES, BASE
# (stdlib/clusters/h100-80g.yaml), OUT, PEAK_TFLOPS (989: H100 SXM dense bf16),
# PEAK_MEM_GBS (3350: H100 SXM HBM3), REPEATS (20), RANKS (1; more runs mist-profile under
# mpirun, one rank per GPU, and also measures NCCL collectives and p2p), JOBS (nproc),
# LINEAR (bf16: the GEMMs as a bf16 trainer runs them; tf32: as the fp32 GPU trainer does,
# for predicting bench/h100/run-trainers.sh's plans: with OUT=...-tf32.yaml, give that file
# to make-trainers.sh as its CLUSTER).
# Exits 77 (the skipped code of ctest and the GPU tests) when there is no GPU.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
BUILD="${BUILD:-$root/build-rt}"
SHAPES="${SHAPES:-$here/gpt3-shapes.tsv}"
BASE="${BASE:-$root/stdlib/clusters/h100-80g.yaml}"
OUT="${OUT:-$root/stdlib/clusters/h100-80g-measured.yaml}"
PEAK_TFLOPS="${PEAK_TFLOPS:-989}"
# The H200 has the H100's compute but 4.8 TB/s of HBM3e: its datasheet figure
# when the driver names one (the first GPU run here, 2026-11-26, capped
# mem_efficiency at 1 for want of it).
if [[ -z ${PEAK_MEM_GBS:-} ]] && nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | grep -q H200; then
  PEAK_MEM_GBS=4800
fi
PEAK_MEM_GBS="${PEAK_MEM_GBS:-3350}"
REPEATS="${REPEATS:-20}"
RANKS="${RANKS:-1}"
JOBS="${JOBS:-$(nproc)}"
LINEAR="${LINEAR:-bf16}"

# A quick check before building; mist-profile itself exits 77 without a GPU as well.
if command -v nvidia-smi >/dev/null 2>&1; then
  if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "profile-h100.sh: no GPU (nvidia-smi -L failed); nothing measured" >&2
    exit 77
  fi
elif ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
  echo "profile-h100.sh: no GPU (no nvidia-smi, no /dev/nvidia*); nothing measured" >&2
  exit 77
fi
if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "profile-h100.sh: no CUDA toolkit (nvcc); mist-profile needs it to build" >&2
  exit 77
fi

cmake -S "$root" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMIST_RUNTIME_ONLY=ON
cmake --build "$BUILD" --target mist-profile -j "$JOBS"

args=(--shapes "$SHAPES" --base "$BASE" --name h100-80g-measured
      --peak-tflops "$PEAK_TFLOPS" --peak-mem-gbs "$PEAK_MEM_GBS" --repeats "$REPEATS"
      --linear-grad "$LINEAR" --out "$OUT")
set +e
if [ "$RANKS" -gt 1 ]; then
  mpirun -np "$RANKS" "$BUILD/bin/mist-profile" "${args[@]}"
else
  "$BUILD/bin/mist-profile" "${args[@]}"
fi
rc=$?
set -e
if [ "$rc" -eq 77 ]; then
  echo "profile-h100.sh: no GPU; nothing measured" >&2
  exit 77
fi
if [ "$rc" -ne 0 ]; then
  echo "profile-h100.sh: mist-profile failed (exit $rc)" >&2
  exit "$rc"
fi
echo "profile-h100.sh: wrote $OUT; check it where mistc builds with"
echo "  build/bin/mist-yaml-check --cluster $OUT"
echo "  build/bin/mistc examples/gpt3-1.3b.mist --cluster $OUT --plan PLAN --emit=report"
echo "A new file in stdlib/clusters is a new preset: the preset lists in"
echo "tests/lit/driver/plan-errors.test and tests/lit/yaml-errors/cluster-preset-name.test change."
