//===- RMSNorm.cu - CUDA RMSNorm over the last axis -----------------------===//
/// \file
/// Forward and the dinp part of backward run one block per row with
/// warp-shuffle block reductions in fp32 (the reference sums in double).
/// dweight is a column sum over the rows, done by its own kernel whose
/// 32 x 8 blocks read 32 consecutive channels of 8 rows at a time.
/// bf16 rows of whole 16-byte vectors (VectorRow.cuh) take the vector
/// kernels, as layernorm's do: the row read once into registers, 8 values
/// per load.
//===----------------------------------------------------------------------===//
#include "stdlib/kernels/rmsnorm/RMSNormCuda.h"

#include "stdlib/kernels/BlockReduce.cuh"
#include "stdlib/kernels/Storage.cuh"
#include "stdlib/kernels/VectorRow.cuh"
#include "stdlib/kernels/norms/NormColumnSums.h"

#include <algorithm>
#include <cuda_runtime.h>
#include <type_traits>

namespace mist::kernels {

namespace {

using namespace mist::kernels::cuda;

/// With `r.sum`, the normalized rows are r.a + r.b, stored in r.sum by the
/// first pass (a.inp is not read): the residual add fused in.
template <typename T> __global__ void rmsNormFwdKernel(RMSNormArgsOf<T> a, ResidualAdd<T> r) {
  for (Index n = blockIdx.x; n < a.rows; n += gridDim.x) {
    const Index row = n * a.channels;
    const T *x = (r.sum ? r.sum : a.inp) + row;
    float sq = 0.f;
    for (Index c = threadIdx.x; c < a.channels; c += blockDim.x) {
      const float v = r.sum ? addAndStore(r, row + c) : load(x, c);
      sq += v * v;
    }
    float s = 1.f / sqrtf(blockSum(sq) / float(a.channels) + a.eps);
    if (threadIdx.x == 0)
      a.rstd[n] = s;
    T *y = a.out + n * a.channels;
    for (Index c = threadIdx.x; c < a.channels; c += blockDim.x)
      store(y, c, load(x, c) * s * load(a.weight, c));
  }
}

/// dx = s * g - x * s^3 * mean(g * x) with g = dy * w.
template <typename T> __global__ void rmsNormBwdInpKernel(RMSNormArgsOf<T> a) {
  for (Index n = blockIdx.x; n < a.rows; n += gridDim.x) {
    const T *x = a.inp + n * a.channels, *dy = a.dout + n * a.channels;
    float s = a.rstd[n];
    float gxSum = 0.f;
    for (Index c = threadIdx.x; c < a.channels; c += blockDim.x)
      gxSum += load(dy, c) * load(a.weight, c) * load(x, c);
    float gx = blockSum(gxSum) / float(a.channels);
    T *dx = a.dinp + n * a.channels;
    for (Index c = threadIdx.x; c < a.channels; c += blockDim.x)
      store(dx, c, s * load(dy, c) * load(a.weight, c) - load(x, c) * s * s * s * gx);
  }
}

/// dweight[c] += sum_n dy * x * s over the rows of chunk blockIdx.y
/// (`rowsPerChunk` rows), channels of tile blockIdx.x. With one chunk the
/// sum goes straight in (deterministic); with several, each chunk's partial
/// sum is added with an fp32 atomicAdd, so the order of the additions,
/// hence the last bits, may vary from run to run.
template <typename T>
__global__ void rmsNormBwdParamKernel(RMSNormArgsOf<T> a, Index rowsPerChunk) {
  __shared__ float dwPart[rowTile][colTile + 1];
  Index c = Index(blockIdx.x) * colTile + threadIdx.x;
  Index begin = Index(blockIdx.y) * rowsPerChunk, end = std::min(a.rows, begin + rowsPerChunk);
  float dw = 0.f;
  if (c < a.channels)
    for (Index n = begin + threadIdx.y; n < end; n += rowTile)
      dw += load(a.dout, n * a.channels + c) * load(a.inp, n * a.channels + c) * a.rstd[n];
  dwPart[threadIdx.y][threadIdx.x] = dw;
  __syncthreads();
  if (threadIdx.y != 0 || c >= a.channels)
    return;
  for (int r = 1; r < rowTile; ++r)
    dw += dwPart[r][threadIdx.x];
  if (gridDim.y == 1)
    a.dweight[c] += dw;
  else
    atomicAdd(a.dweight + c, dw);
}

using bf16 = __nv_bfloat16;

/// Vectors per thread the vector kernels keep in registers: rows up to
/// 16384 / 8192 values.
constexpr int fwdMaxVectors = 8, bwdMaxVectors = 4;

/// rmsNormFwdKernel for bf16 rows of whole vectors (VectorRow.cuh).
template <int MaxVectors>
__global__ void rmsNormFwdVectorKernel(RMSNormArgsOf<bf16> a, ResidualAdd<bf16> r) {
  const Index vectors = a.channels / bf16PerVector;
  for (Index n = blockIdx.x; n < a.rows; n += gridDim.x) {
    const Index row = n * a.channels;
    float x[MaxVectors][8];
    float sq = 0.f;
    forEachHeldVector<MaxVectors>(vectors, [&](int k, Index v) {
      loadNormInput(r, a.inp, row, v, x[k]);
#pragma unroll
      for (int i = 0; i < 8; ++i)
        sq += x[k][i] * x[k][i];
    });
    const float s = 1.f / sqrtf(blockSum(sq) / float(a.channels) + a.eps);
    if (threadIdx.x == 0)
      a.rstd[n] = s;
    forEachHeldVector<MaxVectors>(vectors, [&](int k, Index v) {
      float w[8], y[8];
      loadVector(a.weight, v, w);
#pragma unroll
      for (int i = 0; i < 8; ++i)
        y[i] = x[k][i] * s * w[i];
      storeVector(a.out + row, v, y);
    });
  }
}

/// rmsNormBwdInpKernel for bf16 rows of whole vectors.
template <int MaxVectors> __global__ void rmsNormBwdInpVectorKernel(RMSNormArgsOf<bf16> a) {
  const Index vectors = a.channels / bf16PerVector;
  for (Index n = blockIdx.x; n < a.rows; n += gridDim.x) {
    const Index row = n * a.channels;
    const float s = a.rstd[n];
    float x[MaxVectors][8], g[MaxVectors][8];
    float gxSum = 0.f;
    forEachHeldVector<MaxVectors>(vectors, [&](int k, Index v) {
      float dy[8], w[8];
      loadVector(a.inp + row, v, x[k]);
      loadVector(a.dout + row, v, dy);
      loadVector(a.weight, v, w);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        g[k][i] = dy[i] * w[i];
        gxSum += g[k][i] * x[k][i];
      }
    });
    const float gx = blockSum(gxSum) / float(a.channels);
    forEachHeldVector<MaxVectors>(vectors, [&](int k, Index v) {
      float dx[8];
#pragma unroll
      for (int i = 0; i < 8; ++i)
        dx[i] = s * g[k][i] - x[k][i] * s * s * s * gx;
      storeVector(a.dinp + row, v, dx);
    });
  }
}

template <int K> struct FwdVector {
  static void run(const RMSNormArgsOf<bf16> &a, ResidualAdd<bf16> r, int threads,
                  cudaStream_t stream) {
    rmsNormFwdVectorKernel<K>
        <<<unsigned(std::min(a.rows, maxRowBlocks)), threads, 0, stream>>>(a, r);
  }
};
template <int K> struct BwdInpVector {
  static void run(const RMSNormArgsOf<bf16> &a, int threads, cudaStream_t stream) {
    if constexpr (K <= bwdMaxVectors)
      rmsNormBwdInpVectorKernel<K>
          <<<unsigned(std::min(a.rows, maxRowBlocks)), threads, 0, stream>>>(a);
  }
};

template <typename T>
cudaError_t forward(const RMSNormArgsOf<T> &a, cudaStream_t stream, ResidualAdd<T> r = {}) {
  if (a.rows < 0 || a.channels < 0)
    return cudaErrorInvalidValue;
  if (a.rows == 0 || a.channels == 0)
    return cudaSuccess;
  if constexpr (std::is_same_v<T, bf16>) {
    const VectorLaunch l = vectorLaunch(a.channels, fwdMaxVectors);
    if (l.perThread > 0 && vectorRows(a.channels, a.out, a.inp, a.weight, r.sum, r.a, r.b)) {
      launchVectors<FwdVector>(l.perThread, a, r, l.threads, stream);
      return cudaGetLastError();
    }
  }
  rmsNormFwdKernel<T>
      <<<unsigned(std::min(a.rows, maxRowBlocks)), rowThreads(a.channels), 0, stream>>>(a, r);
  return cudaGetLastError();
}

template <typename T> cudaError_t backward(const RMSNormArgsOf<T> &a, cudaStream_t stream) {
  if (a.rows < 0 || a.channels < 0)
    return cudaErrorInvalidValue;
  if (a.rows == 0 || a.channels == 0)
    return cudaSuccess;
  // The parameter gradients first: they read dout and inp, which dinp may
  // then overwrite (each dinp block reads its whole row before writing it).
  bool vectorParams = false;
  if constexpr (std::is_same_v<T, bf16>) {
    if (vectorRows(a.channels, a.inp, a.dout)) { // columns of whole vectors
      if (cudaError_t err = normColumnSumsCuda(
              {a.dout, a.inp, nullptr, a.rstd, a.dweight, nullptr, a.rows, a.channels}, stream);
          err != cudaSuccess)
        return err;
      vectorParams = true;
    }
  }
  if (!vectorParams) {
    const ColumnSumGrid g = columnSumGrid(a.rows, a.channels);
    rmsNormBwdParamKernel<T><<<g.grid, g.block, 0, stream>>>(a, g.rowsPerChunk);
  }
  if (cudaError_t err = cudaGetLastError(); err != cudaSuccess)
    return err;
  if constexpr (std::is_same_v<T, bf16>) {
    const VectorLaunch l = vectorLaunch(a.channels, bwdMaxVectors);
    if (l.perThread > 0 && vectorRows(a.channels, a.inp, a.dout, a.weight, a.dinp)) {
      launchVectors<BwdInpVector>(l.perThread, a, l.threads, stream);
      return cudaGetLastError();
    }
  }
  rmsNormBwdInpKernel<T>
      <<<unsigned(std::min(a.rows, maxRowBlocks)), rowThreads(a.channels), 0, stream>>>(a);
  return cudaGetLastError();
}

} // namespace

cudaError_t rmsNormFwdCuda(const RMSNormArgs &a, cudaStream_t stream) { return forward(a, stream); }
cudaError_t rmsNormBwdCuda(const RMSNormArgs &a, cudaStream_t stream) {
  return backward(a, stream);
}
cudaError_t rmsNormFwdCuda(const RMSNormBf16Args &a, cudaStream_t stream) {
  return forward(a, stream);
}
cudaError_t rmsNormBwdCuda(const RMSNormBf16Args &a, cudaStream_t stream) {
  return backward(a, stream);
}
cudaError_t addRmsNormFwdCuda(const RMSNormArgs &a, float *sum, const float *x,
                              const float *residual, cudaStream_t stream) {
  if (!sum || !x || !residual)
    return cudaErrorInvalidValue;
  return forward(a, stream, ResidualAdd<float>{sum, x, residual});
}
cudaError_t addRmsNormFwdCuda(const RMSNormBf16Args &a, __nv_bfloat16 *sum, const __nv_bfloat16 *x,
                              const __nv_bfloat16 *residual, cudaStream_t stream) {
  if (!sum || !x || !residual)
    return cudaErrorInvalidValue;
  return forward(a, stream, ResidualAdd<__nv_bfloat16>{sum, x, residual});
}

} // namespace mist::kernels
