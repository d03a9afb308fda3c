//===- NormColumnSums.cu - A norm's weight and bias gradients -------------===//
#include "stdlib/kernels/norms/NormColumnSums.h"

#include "stdlib/kernels/BlockReduce.cuh"
#include "stdlib/kernels/VectorRow.cuh"

#include <algorithm>

namespace mist::kernels {

namespace {

using namespace mist::kernels::cuda;

/// Thread x of a colTile x rowTile block sums the 8 channels of vector
/// blockIdx.x * colTile + x over the rows of chunk blockIdx.y (a warp reads
/// 512 contiguous bytes of a row).
__global__ void normColumnSumsKernel(NormColumnSumsArgs a, Index rowsPerChunk) {
  __shared__ float dwPart[rowTile][colTile * bf16PerVector],
      dbPart[rowTile][colTile * bf16PerVector];
  const Index vectors = a.channels / bf16PerVector;
  const Index v = Index(blockIdx.x) * colTile + threadIdx.x;
  const Index begin = Index(blockIdx.y) * rowsPerChunk,
              end = std::min(a.rows, begin + rowsPerChunk);
  float dw[8] = {}, db[8] = {};
  if (v < vectors)
    for (Index n = begin + threadIdx.y; n < end; n += rowTile) {
      float dy[8], x[8];
      loadVector(a.dout + n * a.channels, v, dy);
      loadVector(a.inp + n * a.channels, v, x);
      const float m = a.mean ? a.mean[n] : 0.f, s = a.rstd[n];
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        dw[i] += dy[i] * ((x[i] - m) * s);
        db[i] += dy[i];
      }
    }
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    dwPart[threadIdx.y][threadIdx.x * 8 + i] = dw[i];
    dbPart[threadIdx.y][threadIdx.x * 8 + i] = db[i];
  }
  __syncthreads();
  if (threadIdx.y != 0 || v >= vectors)
    return;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    for (int r = 1; r < rowTile; ++r) {
      dw[i] += dwPart[r][threadIdx.x * 8 + i];
      db[i] += dbPart[r][threadIdx.x * 8 + i];
    }
    const Index c = v * bf16PerVector + i;
    if (gridDim.y == 1) {
      a.dweight[c] += dw[i];
      if (a.dbias)
        a.dbias[c] += db[i];
    } else {
      atomicAdd(a.dweight + c, dw[i]);
      if (a.dbias)
        atomicAdd(a.dbias + c, db[i]);
    }
  }
}

} // namespace

cudaError_t normColumnSumsCuda(const NormColumnSumsArgs &a, cudaStream_t stream) {
  if (a.rows < 0 || a.channels < 0 || !vectorRows(a.channels, a.dout, a.inp) || !a.rstd ||
      !a.dweight)
    return cudaErrorInvalidValue;
  if (a.rows == 0 || a.channels == 0)
    return cudaSuccess;
  const ColumnSumGrid g = columnSumGrid(a.rows, a.channels / bf16PerVector);
  normColumnSumsKernel<<<g.grid, g.block, 0, stream>>>(a, g.rowsPerChunk);
  return cudaGetLastError();
}

} // namespace mist::kernels
