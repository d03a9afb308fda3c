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

/// A residual add fused into a row kernel (the norms): the row it reads is
/// `sum` = a + b, computed in its first pass and stored as the unfused add
/// would store it, so later passes (and the caller) read the same rounded
/// values. `sum` null: no residual, the kernel reads its input as it is.
template <typename T> struct ResidualAdd {
  T *sum = nullptr;
  const T *a = nullptr, *b = nullptr;
};

/// Element i of the residual sum, stored and read back (its stored value).
template <typename T>
__device__ __forceinline__ float addAndStore(const ResidualAdd<T> &r, Index i) {
  store(r.sum, i, load(r.a, i) + load(r.b, i));
  return load(r.sum, i);
}

} // namespace mist::kernels
