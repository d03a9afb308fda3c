#!/usr/bin/env bash
# Compiles an emitted train.cu against a build folder of this tree:
#   compile-trainer.sh cpu|gpu TRAIN.cu BUILD OUT
# cpu: C++ (-DMIST_CPU) linked with the CPU device layer and ops, for CPU
#      ranks (the same link as the line in train.cu's header);
# gpu: nvcc, linked with the CUDA device layer and ops (runtime/device/
#      CudaDevice.cpp, runtime/ops/CudaOps.cu); BUILD must have been
#      configured where nvcc is found, with mistrtTrainerCuda built, e.g. on
#      a GPU host without the compiler's dependencies:
#        cmake -S . -B BUILD -DMIST_RUNTIME_ONLY=ON
#        cmake --build BUILD --target mistrtTrainer mistrtTrainerCuda
set -euo pipefail
[[ $# -eq 4 && ($1 == cpu || $1 == gpu) ]] || {
  echo "usage: compile-trainer.sh cpu|gpu TRAIN.cu BUILD OUT" >&2; exit 2; }
kind=$1 train=$2 build=$(cd "$3" && pwd) out=$4
src=$(cd "$(dirname "$0")/.." && pwd)
common=(runtime/data/libmistrtData.a runtime/checkpoint/libmistrtCheckpoint.a
        runtime/comm/libmistrtComm.a schedule/libmistSchedule.a format/libmistFormat.a)
if [[ $kind == cpu ]]; then
  libs=(runtime/trainer/libmistrtTrainer.a runtime/ops/libmistrtOps.a
        runtime/device/libmistrtTensor.a runtime/device/libmistrtDeviceHost.a "${common[@]}"
        stdlib/kernels/libmistKernelsCpu.a stdlib/kernels/libmistKernelsRef.a)
else
  libs=(runtime/trainer/libmistrtTrainerCuda.a runtime/ops/libmistrtOpsCuda.a
        stdlib/kernels/libmistKernelsCuda.a runtime/device/libmistrtTensor.a
        runtime/device/libmistrtDeviceCuda.a)
  # Built where NCCL was found; without it the GPU trainer runs one GPU.
  [[ -f $build/runtime/comm/libmistrtCommNccl.a ]] && libs+=(runtime/comm/libmistrtCommNccl.a)
  libs+=("${common[@]}")
fi
for lib in "${libs[@]}"; do
  [[ -f $build/$lib ]] || {
    echo "compile-trainer.sh: $build/$lib is missing (build mistrtTrainer / mistrtTrainerCuda in $build)" >&2
    exit 1; }
done
if [[ $kind == cpu ]]; then
  # TRAINER_OPT: as in build-trainer.sh (tests that build many trainers).
  opt=${TRAINER_OPT:--O2}
  # The build tree's precompiled runtime headers, where there are some for this -O level
  # (runtime/trainer/TrainerHeaders.h); without them the same program, compiled more slowly.
  pch=()
  if [[ -f $build/trainer-pch/${opt#-}/TrainerHeaders.h.gch ]]; then
    pch=(-I"$build/trainer-pch/${opt#-}" -include TrainerHeaders.h)
  fi
  # OpenBLAS and OpenMP for the fast CPU kernels, as CMake found them for this build.
  read -r -a extra <"$build/stdlib/kernels/cpu-kernels-link.txt" || extra=()
  mpicxx -std=c++20 "$opt" -DMIST_CPU "${pch[@]}" -I"$src" -x c++ "$train" -x none \
    "${libs[@]/#/$build/}" "${extra[@]}" -o "$out"
else
  nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
  [[ -x $nvcc ]] || { echo "compile-trainer.sh: no nvcc (set CUDACXX)" >&2; exit 1; }
  cudaLib=$(dirname "$(dirname "$nvcc")")/lib64
  "$nvcc" -std=c++20 -O2 -I"$src" -c "$train" -o "$out.o"
  # NCCL: where CMake found it for this build (the CUDA toolkit's, or the system's).
  nccl=$(sed -n 's/^NCCL_LIBRARY:FILEPATH=//p' "$build/CMakeCache.txt" | grep -v NOTFOUND || true)
  # cuDNN and NVRTC for the bf16 attention, where CMake found cuDNN for this build
  # (stdlib/kernels/CMakeLists.txt; empty without it, absent in older build folders).
  extra=()
  if [[ -f $build/stdlib/kernels/cuda-kernels-link.txt ]]; then
    read -r -a extra <"$build/stdlib/kernels/cuda-kernels-link.txt" || true
  fi
  mpicxx "$out.o" "${libs[@]/#/$build/}" "${nccl:--lnccl}" "${extra[@]}" -L"$cudaLib" -lcublasLt \
    -lcudart -Wl,-rpath,"$cudaLib" -o "$out"
  rm -f "$out.o"
fi
echo "built $out ($kind trainer)"
