//===- LayerNorm.cu - CUDA LayerNorm over the last axis -------------------===//
/// \file
/// Forward and the dinp part of backward run one block per row with
/// warp-shuffle block reductions in fp32 (the reference sums in double: the
/// two-pass mean / variance keeps the difference at fp32 rounding).
/// dweight and dbias are column sums over the rows, done by their own kernel
/// whose 32 x 8 blocks read 32 consecutive channels of 8 rows at a time.
/// bf16 rows of whole 16-byte vectors (VectorRow.cuh) take the vector
/// kernels: the row read once into registers, 8 values per load.
//===----------------------------------------------------------------------===//
#include "stdlib/kernels/layernorm/LayerNormCuda.h"

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

using bf16 = __nv_bfloat16;

/// Vectors per thread the vector kernels keep in registers: rows up to
/// 16384 / 8192 values (vectorLaunch's 256 threads).
constexpr int fwdMaxVectors = 8, bwdMaxVectors = 4;

/// layerNormFwdKernel for bf16 rows of whole vectors, each thread holding
/// vectors threadIdx.x + k * blockDim.x (k < MaxVectors) of its row.
template <int MaxVectors>
__global__ void layerNormFwdVectorKernel(LayerNormArgsOf<bf16> a, ResidualAdd<bf16> r) {
  const Index vectors = a.channels / bf16PerVector;
  for (Index n = blockIdx.x; n < a.rows; n += gridDim.x) {
    const Index row = n * a.channels;
    float x[MaxVectors][8];
    float sum = 0.f;
    forEachHeldVector<MaxVectors>(vectors, [&](int k, Index v) {
      loadNormInput(r, a.inp, row, v, x[k]);
#pragma unroll
      for (int i = 0; i < 8; ++i)
        sum += x[k][i];
    });
    const float m = blockSum(sum) / float(a.channels);
    float sq = 0.f;
    forEachHeldVector<MaxVectors>(vectors, [&](int k, Index) {
#pragma unroll
      for (int i = 0; i < 8; ++i)
        sq += (x[k][i] - m) * (x[k][i] - m);
    });
    const float s = 1.f / sqrtf(blockSum(sq) / float(a.channels) + a.eps);
    if (threadIdx.x == 0) {
      a.mean[n] = m;
      a.rstd[n] = s;
    }
    forEachHeldVector<MaxVectors>(vectors, [&](int k, Index v) {
      float w[8], b[8] = {}, y[8];
      loadVector(a.weight, v, w);
      if (a.bias)
        loadVector(a.bias, v, b);
#pragma unroll
      for (int i = 0; i < 8; ++i)
        y[i] = (x[k][i] - m) * s * w[i] + b[i];
      storeVector(a.out + row, v, y);
    });
  }
}

/// layerNormBwdInpKernel for bf16 rows of whole vectors (as above).
template <int MaxVectors> __global__ void layerNormBwdInpVectorKernel(LayerNormArgsOf<bf16> a) {
  const Index vectors = a.channels / bf16PerVector;
  for (Index n = blockIdx.x; n < a.rows; n += gridDim.x) {
    const Index row = n * a.channels;
    const float m = a.mean[n], s = a.rstd[n];
    float xhat[MaxVectors][8], g[MaxVectors][8];
    float gSum = 0.f, gxSum = 0.f;
    forEachHeldVector<MaxVectors>(vectors, [&](int k, Index v) {
      float x[8], dy[8], w[8];
      loadVector(a.inp + row, v, x);
      loadVector(a.dout + row, v, dy);
      loadVector(a.weight, v, w);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        xhat[k][i] = (x[i] - m) * s;
        g[k][i] = dy[i] * w[i];
        gSum += g[k][i];
        gxSum += g[k][i] * xhat[k][i];
      }
    });
    const float gMean = blockSum(gSum) / float(a.channels);
    const float gxMean = blockSum(gxSum) / float(a.channels);
    forEachHeldVector<MaxVectors>(vectors, [&](int k, Index v) {
      float dx[8];
#pragma unroll
      for (int i = 0; i < 8; ++i)
        dx[i] = s * (g[k][i] - gMean - xhat[k][i] * gxMean);
      storeVector(a.dinp + row, v, dx);
    });
  }
}

template <int K> struct FwdVector {
  static void run(const LayerNormArgsOf<bf16> &a, ResidualAdd<bf16> r, int threads,
                  cudaStream_t stream) {
    layerNormFwdVectorKernel<K>
        <<<unsigned(std::min(a.rows, maxRowBlocks)), threads, 0, stream>>>(a, r);
  }
};
template <int K> struct BwdInpVector {
  static void run(const LayerNormArgsOf<bf16> &a, int threads, cudaStream_t stream) {
    if constexpr (K <= bwdMaxVectors)
      layerNormBwdInpVectorKernel<K>
          <<<unsigned(std::min(a.rows, maxRowBlocks)), threads, 0, stream>>>(a);
  }
};

template <typename T>
cudaError_t forward(const LayerNormArgsOf<T> &a, cudaStream_t stream, ResidualAdd<T> r = {}) {
  if (a.rows < 0 || a.channels < 0)
    return cudaErrorInvalidValue;
  if (a.rows == 0 || a.channels == 0)
    return cudaSuccess;
  if constexpr (std::is_same_v<T, bf16>) {
    const VectorLaunch l = vectorLaunch(a.channels, fwdMaxVectors);
    if (l.perThread > 0 &&
        vectorRows(a.channels, a.out, a.inp, a.weight, a.bias, r.sum, r.a, r.b)) {
      launchVectors<FwdVector>(l.perThread, a, r, l.threads, stream);
      return cudaGetLastError();
    }
  }
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
  bool vectorParams = false;
  if constexpr (std::is_same_v<T, bf16>) {
    if (vectorRows(a.channels, a.inp, a.dout)) { // columns of whole vectors
      if (cudaError_t err = normColumnSumsCuda(
              {a.dout, a.inp, a.mean, a.rstd, a.dweight, a.dbias, a.rows, a.channels}, stream);
          err != cudaSuccess)
        return err;
      vectorParams = true;
    }
  }
  if (!vectorParams) {
    const ColumnSumGrid g = columnSumGrid(a.rows, a.channels);
    layerNormBwdParamKernel<T><<<g.grid, g.block, 0, stream>>>(a, g.rowsPerChunk);
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
