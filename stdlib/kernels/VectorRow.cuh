//===- VectorRow.cuh - 16-byte loads and stores of 8 bf16 values ----------===//
/// \file
/// Memory-bound row kernels (the norms) read and write bf16 rows 16 bytes,
/// 8 values, per instruction: a warp's scalar 2-byte loads move 64 bytes
/// each, too little to keep the memory busy (a GPT-3 1.3B layernorm forward
/// ran at 0.8 TB/s on an H200 so). The values are widened to fp32 and rounded
/// back to nearest even, as load/store in Storage.cuh do one by one.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/Tensor.h"

#include <cstdint>
#include <cuda_bf16.h>

namespace mist::kernels::cuda {

constexpr int bf16PerVector = 8;

/// Whether every pointer is 16-byte aligned (null ones are ignored) and a
/// row of `channels` values is whole vectors: the vector kernels' condition.
template <typename... Pointers> inline bool vectorRows(Index channels, Pointers... pointers) {
  auto aligned = [](const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return channels % bf16PerVector == 0 && (aligned(pointers) && ...);
}

/// Vector `v` (values 8v .. 8v + 7) of `row`, widened.
__device__ __forceinline__ void loadVector(const __nv_bfloat16 *row, Index v, float (&out)[8]) {
  const uint4 raw = reinterpret_cast<const uint4 *>(row)[v];
  const __nv_bfloat162 *pairs = reinterpret_cast<const __nv_bfloat162 *>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(pairs[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

/// Stores `in` rounded to bf16 as vector `v` of `row`.
__device__ __forceinline__ void storeVector(__nv_bfloat16 *row, Index v, const float (&in)[8]) {
  uint4 raw;
  __nv_bfloat162 *pairs = reinterpret_cast<__nv_bfloat162 *>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i)
    pairs[i] = __floats2bfloat162_rn(in[2 * i], in[2 * i + 1]);
  reinterpret_cast<uint4 *>(row)[v] = raw;
}

} // namespace mist::kernels::cuda
