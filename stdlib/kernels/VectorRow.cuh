//===- VectorRow.cuh - 16-byte loads and stores of 8 bf16 values ----------===//
/// \file
/// Memory-bound row kernels (the norms) read and write bf16 rows 16 bytes,
/// 8 values, per instruction: a warp's scalar 2-byte loads move 64 bytes
/// each, too little to keep the memory busy (a GPT-3 1.3B layernorm forward
/// ran at 0.8 TB/s on an H200 so). The values are widened to fp32 and rounded
/// back to nearest even, as load/store in Storage.cuh do one by one.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/Storage.cuh"
#include "stdlib/kernels/Tensor.h"

#include <algorithm>
#include <cstdint>
#include <cuda_bf16.h>

namespace mist::kernels::cuda {

constexpr int bf16PerVector = 8;

/// Whether every pointer is 16-byte aligned (a null one is).
template <typename... Pointers> inline bool aligned16(Pointers... pointers) {
  auto aligned = [](const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return (aligned(pointers) && ...);
}

/// Whether every pointer is 16-byte aligned and a row of `channels` values
/// is whole vectors: the row kernels' condition for their vector versions.
template <typename... Pointers> inline bool vectorRows(Index channels, Pointers... pointers) {
  return channels % bf16PerVector == 0 && aligned16(pointers...);
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

/// The value as bf16 stores it (a fused residual add reads back what it stored).
__device__ __forceinline__ float roundedToBf16(float v) {
  return __bfloat162float(__float2bfloat16_rn(v));
}

/// Vector `v` of row `row` of a norm's input: `inp` itself, or with a fused
/// residual add (`r.sum` set) a + b, stored to r.sum and returned as stored,
/// as the unfused add (Storage.cuh's addAndStore) leaves it.
__device__ __forceinline__ void loadNormInput(const ResidualAdd<__nv_bfloat16> &r,
                                              const __nv_bfloat16 *inp, Index row, Index v,
                                              float (&x)[8]) {
  if (!r.sum) {
    loadVector(inp + row, v, x);
    return;
  }
  float b[8];
  loadVector(r.a + row, v, x);
  loadVector(r.b + row, v, b);
#pragma unroll
  for (int i = 0; i < 8; ++i)
    x[i] += b[i];
  storeVector(r.sum + row, v, x);
#pragma unroll
  for (int i = 0; i < 8; ++i)
    x[i] = roundedToBf16(x[i]);
}

/// f(k, v) for each vector a thread holds of a row of `vectors`: vector
/// v = threadIdx.x + k * blockDim.x, k < MaxVectors. The loop is unrolled,
/// so k is a constant in each call and register arrays indexed by it stay
/// in registers.
template <int MaxVectors, typename F>
__device__ __forceinline__ void forEachHeldVector(Index vectors, F &&f) {
#pragma unroll
  for (int k = 0; k < MaxVectors; ++k) {
    const Index v = threadIdx.x + Index(k) * blockDim.x;
    if (v < vectors)
      f(k, v);
  }
}

/// Row kernels that keep a row in registers: one block of `threads` per
/// row, each thread holding `perThread` of its vectors (threadIdx.x + k *
/// blockDim.x). perThread is 0 where a row does not fit `maxVectors` a thread.
struct VectorLaunch {
  int threads, perThread;
};
inline VectorLaunch vectorLaunch(Index channels, int maxVectors) {
  constexpr Index maxThreads = 256; // one vector each up to this many, then several
  const Index vectors = channels / bf16PerVector;
  const int threads =
      int(std::min<Index>(maxThreads, std::max<Index>(32, (vectors + 31) / 32 * 32)));
  const Index perThread = (vectors + threads - 1) / threads;
  return {threads, perThread <= maxVectors ? int(perThread) : 0};
}

/// Launcher<K>::run(args...) for the smallest K in {1, 2, 4, 8} >= perThread
/// (the register arrays' size is a template argument).
template <template <int> class Launcher, typename... Args>
void launchVectors(int perThread, Args &&...args) {
  if (perThread <= 1)
    Launcher<1>::run(args...);
  else if (perThread <= 2)
    Launcher<2>::run(args...);
  else if (perThread <= 4)
    Launcher<4>::run(args...);
  else
    Launcher<8>::run(args...);
}

} // namespace mist::kernels::cuda
