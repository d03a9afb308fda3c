//===- BlockReduce.cuh - Warp and block reductions the CUDA kernels share -===//
/// \file
/// Row kernels (norms, cross-entropy) run one block per row and reduce over
/// the block; attention reduces over a warp. These are the shared pieces.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/Tensor.h"
#include <algorithm>
#include <cuda_runtime.h>

namespace mist::kernels::cuda {

/// Row blocks launched at most; kernels loop over the rows beyond.
constexpr Index maxRowBlocks = Index(1) << 20;

struct Max {
  __device__ float operator()(float x, float y) const { return fmaxf(x, y); }
};
struct Sum {
  template <typename T> __device__ T operator()(T x, T y) const { return x + y; }
};

/// The reduction over the warp, in every lane.
template <typename T, typename Combine> __device__ inline T warpReduce(T v, Combine combine) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = combine(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

__device__ inline float warpSum(float v) { return warpReduce(v, Sum()); }
__device__ inline float warpMax(float v) { return warpReduce(v, Max()); }

/// The reduction over the block (blockDim.x a multiple of 32), in every
/// thread; `identity` pads the missing warps.
template <typename T, typename Combine>
__device__ inline T blockReduce(T v, T identity, Combine combine) {
  __shared__ T partial[32];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warpReduce(v, combine);
  __syncthreads(); // a previous call may still be reading `partial`
  if (lane == 0)
    partial[warp] = v;
  __syncthreads();
  return warpReduce(lane < int(blockDim.x / 32) ? partial[lane] : identity, combine);
}

__device__ inline float blockSum(float v) { return blockReduce(v, 0.f, Sum()); }

/// Threads per row block: enough for the row, a multiple of 32, at most 512.
inline int rowThreads(Index channels) {
  return int(std::min<Index>(512, std::max<Index>(32, (channels + 31) / 32 * 32)));
}

/// Column sums over rows (a norm's dweight / dbias): blocks of colTile
/// channels x rowTile rows, the rows split into chunks so that about 1024
/// blocks run (chunks of at least 64 rows); each chunk adds its partial sums.
constexpr int colTile = 32, rowTile = 8;
struct ColumnSumGrid {
  dim3 grid, block;
  Index rowsPerChunk;
};
inline ColumnSumGrid columnSumGrid(Index rows, Index channels) {
  Index tiles = (channels + colTile - 1) / colTile;
  Index chunks = std::clamp<Index>(1024 / tiles, 1, std::min<Index>((rows + 63) / 64, 65535));
  Index rowsPerChunk = (rows + chunks - 1) / chunks;
  chunks = (rows + rowsPerChunk - 1) / rowsPerChunk;
  return {dim3(unsigned(tiles), unsigned(chunks)), dim3(colTile, rowTile), rowsPerChunk};
}

} // namespace mist::kernels::cuda
