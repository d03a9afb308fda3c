//===- Storage.cuh - fp32 arithmetic on fp32 or bf16 memory ---------------===//
/// \file
/// The CUDA kernels compute in fp32 whatever their tensors' storage type:
/// `load` widens an element (exact), `store` rounds an fp32 result to the
/// element's type once (bf16: to nearest even, as the runtime's toBf16 and
/// the CPU ranks do). A bf16 kernel therefore computes what the fp32 kernel
/// computes on widened copies, rounded at its outputs: the numerics the
/// runtime's fp32 staging (runtime/ops/Fp32Staging.h) had, without the
/// copies. `StorageOf<float>` / `StorageOf<__nv_bfloat16>` name the pairs.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/Tensor.h"

#include <cuda_bf16.h>

namespace mist::kernels {

__device__ __forceinline__ float load(const float *p, Index i) { return p[i]; }
__device__ __forceinline__ float load(const __nv_bfloat16 *p, Index i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ void store(float *p, Index i, float v) { p[i] = v; }
__device__ __forceinline__ void store(__nv_bfloat16 *p, Index i, float v) {
  p[i] = __float2bfloat16_rn(v);
}

} // namespace mist::kernels
