//===- LayerNorm.cu - CUDA LayerNorm over the last axis -------------------===//
/// \file
/// Forward and the dinp part of backward run one block per row with
/// warp-shuffle block reductions in fp32 (the reference sums in double: the
/// two-pass mean / variance keeps the difference at fp32 rounding).
/// dweight and dbias are column sums over the rows, done by their own kernel
/// whose 32 x 8 blocks read 32 consecutive channels of 8 rows at a time.
//===----------------------------------------------------------------------===//
#include "stdlib/kernels/layernorm/LayerNormCuda.h"

#include "stdlib/kernels/BlockReduce.cuh"
#include "stdlib/kernels/Storage.cuh"

#include <algorithm>
#include <cuda_runtime.h>

namespace mist::kernels {

namespace {

using namespace mist::kernels::cuda;

/// With `r.sum`, the normalized rows are r.a + r.b, stored in r.sum by the
/// first pass (a.inp is not read): the residual add fused in.
template <typename T> __global__ void layerNormFwdKernel(LayerNormArgsOf<T> a, ResidualAdd<T> r) {
  for (Index n = blockIdx.x; n < a.rows; n += gridDim.x) {
    const Index row = n * a.channels;
    const T *x = (r.sum ? r.sum : a.inp) + row;
    float sum = 0.f;
    for (Index c = threadIdx.x; c < a.channels; c += blockDim.x)
      sum += r.sum ? addAndStore(r, row + c) : load(x, c);
    float m = blockSum(sum) / float(a.channels);
    float sq = 0.f;
    for (Index c = threadIdx.x; c < a.channels; c += blockDim.x)
      sq += (load(x, c) - m) * (load(x, c) - m);
    float s = 1.f / sqrtf(blockSum(sq) / float(a.channels) + a.eps);
    if (threadIdx.x == 0) {
      a.mean[n] = m;
      a.rstd[n] = s;
    }
    T *y = a.out + n * a.channels;
    for (Index c = threadIdx.x; c < a.channels; c += blockDim.x)
      store(y, c, (load(x, c) - m) * s * load(a.weight, c) + (a.bias ? load(a.bias, c) : 0.f));
  }
}

/// dx = s * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w.
template <typename T> __global__ void layerNormBwdInpKernel(LayerNormArgsOf<T> a) {
  for (Index n = blockIdx.x; n < a.rows; n += gridDim.x) {
    const T *x = a.inp + n * a.channels, *dy = a.dout + n * a.channels;
    float m = a.mean[n], s = a.rstd[n];
    float gSum = 0.f, gxSum = 0.f;
    for (Index c = threadIdx.x; c < a.channels; c += blockDim.x) {
      float xhat = (load(x, c) - m) * s, g = load(dy, c) * load(a.weight, c);
      gSum += g;
      gxSum += g * xhat;
    }
    float gMean = blockSum(gSum) / float(a.channels);
    float gxMean = blockSum(gxSum) / float(a.channels);
    T *dx = a.dinp + n * a.channels;
    for (Index c = threadIdx.x; c < a.channels; c += blockDim.x) {
      float xhat = (load(x, c) - m) * s, g = load(dy, c) * load(a.weight, c);
      store(dx, c, s * (g - gMean - xhat * gxMean));
    }
  }
}

/// dweight[c] += sum_n dy * xhat and dbias[c] += sum_n dy over the rows of
/// chunk blockIdx.y (`rowsPerChunk` rows), channels of tile blockIdx.x.
/// With one chunk the sum goes straight in (deterministic); with several,
/// each chunk's partial sum is added with an fp32 atomicAdd, so the order
/// of the additions, hence the last bits, may vary from run to run.
template <typename T>
__global__ void layerNormBwdParamKernel(LayerNormArgsOf<T> a, Index rowsPerChunk) {
  __shared__ float dwPart[rowTile][colTile + 1], dbPart[rowTile][colTile + 1];
  Index c = Index(blockIdx.x) * colTile + threadIdx.x;
  Index begin = Index(blockIdx.y) * rowsPerChunk, end = std::min(a.rows, begin + rowsPerChunk);
  float dw = 0.f, db = 0.f;
  if (c < a.channels)
    for (Index n = begin + threadIdx.y; n < end; n += rowTile) {
      float dy = load(a.dout, n * a.channels + c);
      dw += dy * ((load(a.inp, n * a.channels + c) - a.mean[n]) * a.rstd[n]);
      db += dy;
    }
  dwPart[threadIdx.y][threadIdx.x] = dw;
  dbPart[threadIdx.y][threadIdx.x] = db;
  __syncthreads();
  if (threadIdx.y != 0 || c >= a.channels)
    return;
  for (int r = 1; r < rowTile; ++r) {
    dw += dwPart[r][threadIdx.x];
    db += dbPart[r][threadIdx.x];
  }
  if (gridDim.y == 1) {
    a.dweight[c] += dw;
    if (a.dbias)
      a.dbias[c] += db;
  } else {
    atomicAdd(a.dweight + c, dw);
    if (a.dbias)
      atomicAdd(a.dbias + c, db);
  }
}

template <typename T>
cudaError_t forward(const LayerNormArgsOf<T> &a, cudaStream_t stream, ResidualAdd<T> r = {}) {
  if (a.rows < 0 || a.channels < 0)
    return cudaErrorInvalidValue;
  if (a.rows == 0 || a.channels == 0)
    return cudaSuccess;
  layerNormFwdKernel<T>
      <<<unsigned(std::min(a.rows, maxRowBlocks)), rowThreads(a.channels), 0, stream>>>(a, r);
  return cudaGetLastError();
}

template <typename T> cudaError_t backward(const LayerNormArgsOf<T> &a, cudaStream_t stream) {
  if (a.rows < 0 || a.channels < 0)
    return cudaErrorInvalidValue;
  if (a.rows == 0 || a.channels == 0)
    return cudaSuccess;
  // The parameter gradients first: they read dout and inp, which dinp may
  // then overwrite (each dinp block reads its whole row before writing it).
  const ColumnSumGrid g = columnSumGrid(a.rows, a.channels);
  layerNormBwdParamKernel<T><<<g.grid, g.block, 0, stream>>>(a, g.rowsPerChunk);
  if (cudaError_t err = cudaGetLastError(); err != cudaSuccess)
    return err;
  layerNormBwdInpKernel<T>
      <<<unsigned(std::min(a.rows, maxRowBlocks)), rowThreads(a.channels), 0, stream>>>(a);
  return cudaGetLastError();
}

} // namespace

cudaError_t layerNormFwdCuda(const LayerNormArgs &a, cudaStream_t stream) {
  return forward(a, stream);
}
cudaError_t layerNormBwdCuda(const LayerNormArgs &a, cudaStream_t stream) {
  return backward(a, stream);
}
cudaError_t layerNormFwdCuda(const LayerNormBf16Args &a, cudaStream_t stream) {
  return forward(a, stream);
}
cudaError_t layerNormBwdCuda(const LayerNormBf16Args &a, cudaStream_t stream) {
  return backward(a, stream);
}
cudaError_t addLayerNormFwdCuda(const LayerNormArgs &a, float *sum, const float *x,
                                const float *residual, cudaStream_t stream) {
  if (!sum || !x || !residual)
    return cudaErrorInvalidValue;
  return forward(a, stream, ResidualAdd<float>{sum, x, residual});
}
cudaError_t addLayerNormFwdCuda(const LayerNormBf16Args &a, __nv_bfloat16 *sum,
                                const __nv_bfloat16 *x, const __nv_bfloat16 *residual,
                                cudaStream_t stream) {
  if (!sum || !x || !residual)
    return cudaErrorInvalidValue;
  return forward(a, stream, ResidualAdd<__nv_bfloat16>{sum, x, residual});
}

} // namespace mist::kernels
