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
/// 512 contiguous bytes of a row). With one chunk the sums go straight into
/// dweight / dbias; with several, into chunk blockIdx.y's row of the
/// partials, which columnTotalsKernel then adds in chunk order.
__global__ void normColumnSumsKernel(NormColumnSumsArgs a, Index rowsPerChunk, float *dwPartials,
                                     float *dbPartials) {
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
  float *dwOut = dwPartials ? dwPartials + Index(blockIdx.y) * a.channels : a.dweight;
  float *dbOut = dbPartials ? dbPartials + Index(blockIdx.y) * a.channels : a.dbias;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    for (int r = 1; r < rowTile; ++r) {
      dw[i] += dwPart[r][threadIdx.x * 8 + i];
      db[i] += dbPart[r][threadIdx.x * 8 + i];
    }
    const Index c = v * bf16PerVector + i;
    if (dwPartials) { // this chunk's sums, added in order by columnTotalsKernel
      dwOut[c] = dw[i];
      if (dbOut)
        dbOut[c] = db[i];
    } else {
      dwOut[c] += dw[i];
      if (dbOut)
        dbOut[c] += db[i];
    }
  }
}

/// dweight[c] += the chunks' partial sums of column c, chunk by chunk (and
/// dbias): the same order every run, so the same bits.
__global__ void columnTotalsKernel(NormColumnSumsArgs a, Index chunks, const float *dwPartials,
                                   const float *dbPartials) {
  const Index stride = Index(gridDim.x) * blockDim.x;
  for (Index c = Index(blockIdx.x) * blockDim.x + threadIdx.x; c < a.channels; c += stride) {
    float dw = 0.f, db = 0.f;
    for (Index k = 0; k < chunks; ++k) {
      dw += dwPartials[k * a.channels + c];
      if (a.dbias)
        db += dbPartials[k * a.channels + c];
    }
    a.dweight[c] += dw;
    if (a.dbias)
      a.dbias[c] += db;
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
  const Index chunks = g.grid.y;
  if (chunks == 1) {
    normColumnSumsKernel<<<g.grid, g.block, 0, stream>>>(a, g.rowsPerChunk, nullptr, nullptr);
    return cudaGetLastError();
  }
  // Partials of every chunk, stream-ordered from the device's pool (kept
  // between steps: CudaDevice.cpp), then added in order.
  const size_t each = size_t(chunks) * size_t(a.channels) * sizeof(float);
  void *partials = nullptr;
  if (cudaError_t rc = cudaMallocAsync(&partials, a.dbias ? 2 * each : each, stream);
      rc != cudaSuccess)
    return rc;
  float *dw = static_cast<float *>(partials), *db = a.dbias ? dw + chunks * a.channels : nullptr;
  normColumnSumsKernel<<<g.grid, g.block, 0, stream>>>(a, g.rowsPerChunk, dw, db);
  cudaError_t rc = cudaGetLastError();
  if (rc == cudaSuccess) {
    constexpr int threads = 256;
    const Index blocks = std::min<Index>((a.channels + threads - 1) / threads, 1024);
    columnTotalsKernel<<<unsigned(blocks), threads, 0, stream>>>(a, chunks, dw, db);
    rc = cudaGetLastError();
  }
  cudaFreeAsync(partials, stream);
  return rc;
}

} // namespace mist::kernels
