//===- CrossEntropy.cu - CUDA vocab-parallel cross-entropy ----------------===//
/// \file
/// Max, sum and backward run one block per row, with warp-shuffle block
/// reductions in fp32 (the reference sums exp in double); the loss is one
/// block summing the rows in double. bf16 rows of whole 16-byte vectors
/// (VectorRow.cuh) are read and written 8 values per access.
//===----------------------------------------------------------------------===//
#include "stdlib/kernels/crossentropy/CrossEntropyCuda.h"

#include "stdlib/kernels/BlockReduce.cuh"
#include "stdlib/kernels/Storage.cuh"
#include "stdlib/kernels/VectorRow.cuh"

#include <algorithm>
#include <cuda_runtime.h>
#include <type_traits>

namespace mist::kernels {

namespace {

using namespace mist::kernels::cuda;

constexpr int rowBlockThreads = 512;
constexpr int lossThreads = 256;
/// Calls f(value) for each value of `row` (n values) this thread takes: the
/// block's threads stride over it, 8 values per load where `Vector`.
template <bool Vector, typename T, typename F>
__device__ __forceinline__ void forEachValue(const T *row, Index n, F f) {
  if constexpr (Vector) {
    for (Index v = threadIdx.x; v < n / bf16PerVector; v += blockDim.x) {
      float x[8];
      loadVector(row, v, x);
#pragma unroll
      for (int i = 0; i < 8; ++i)
        f(x[i]);
    }
  } else {
    for (Index v = threadIdx.x; v < n; v += blockDim.x)
      f(load(row, v));
  }
}

template <typename T, bool Vector> __global__ void crossEntropyMaxKernel(CrossEntropyArgsOf<T> a) {
  for (Index n = blockIdx.x; n < a.rows; n += gridDim.x) {
    float m = -INFINITY;
    forEachValue<Vector>(a.logits + n * a.vocab, a.vocab, [&](float x) { m = fmaxf(m, x); });
    m = blockReduce(m, -INFINITY, Max());
    if (threadIdx.x == 0)
      a.rowMax[n] = m;
  }
}

template <typename T, bool Vector> __global__ void crossEntropySumKernel(CrossEntropyArgsOf<T> a) {
  for (Index n = blockIdx.x; n < a.rows; n += gridDim.x) {
    const T *logits = a.logits + n * a.vocab;
    float m = a.rowMax[n], s = 0.f;
    forEachValue<Vector>(logits, a.vocab, [&](float x) { s += expf(x - m); });
    s = blockReduce(s, 0.f, Sum());
    if (threadIdx.x == 0) {
      a.sumExp[n] = s;
      Index t = Index(a.targets[n]) - a.vocabStart;
      a.targetLogit[n] = t >= 0 && t < a.vocab ? load(logits, t) : 0.f;
    }
  }
}

template <typename T> __global__ void crossEntropyLossKernel(CrossEntropyArgsOf<T> a, float *loss) {
  double sum = 0;
  for (Index n = threadIdx.x; n < a.rows; n += blockDim.x)
    sum += log(double(a.sumExp[n])) + a.rowMax[n] - a.targetLogit[n];
  sum = blockReduce(sum, 0.0, Sum());
  if (threadIdx.x == 0)
    *loss = float(sum / double(a.totalRows));
}

/// scale = dloss / totalRows, or computed here from `*dloss` when not null.
template <typename T, bool Vector>
__global__ void crossEntropyBwdKernel(CrossEntropyArgsOf<T> a, float scale, const float *dloss) {
  if (dloss)
    scale = *dloss / float(a.totalRows);
  for (Index n = blockIdx.x; n < a.rows; n += gridDim.x) {
    const T *logits = a.logits + n * a.vocab;
    T *dlogits = a.dlogits + n * a.vocab;
    float m = a.rowMax[n], inv = 1.f / a.sumExp[n];
    Index t = Index(a.targets[n]) - a.vocabStart;
    if constexpr (Vector) {
      for (Index v = threadIdx.x; v < a.vocab / bf16PerVector; v += blockDim.x) {
        float x[8];
        loadVector(logits, v, x);
#pragma unroll
        for (int i = 0; i < 8; ++i)
          x[i] = (expf(x[i] - m) * inv - (v * bf16PerVector + i == t ? 1.f : 0.f)) * scale;
        storeVector(dlogits, v, x);
      }
    } else {
      for (Index v = threadIdx.x; v < a.vocab; v += blockDim.x) {
        float p = expf(load(logits, v) - m) * inv;
        store(dlogits, v, (p - (v == t ? 1.f : 0.f)) * scale);
      }
    }
  }
}

/// Whether the kernels read (and write) this call's rows 8 values at a time.
template <typename T> bool vectorRowsOf(const CrossEntropyArgsOf<T> &a) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return vectorRows(a.vocab, a.logits, a.dlogits);
  else
    return false;
}

/// kernel<T, true> or kernel<T, false>, as vectorRowsOf says.
#define MIST_CE_LAUNCH(kernel, a, stream, ...)                                                     \
  do {                                                                                             \
    if constexpr (std::is_same_v<T, __nv_bfloat16>) {                                              \
      if (vectorRowsOf(a)) {                                                                       \
        kernel<T, true><<<rowBlocks(a), rowBlockThreads, 0, stream>>>(__VA_ARGS__);                \
        break;                                                                                     \
      }                                                                                            \
    }                                                                                              \
    kernel<T, false><<<rowBlocks(a), rowBlockThreads, 0, stream>>>(__VA_ARGS__);                   \
  } while (false)

template <typename T> bool invalid(const CrossEntropyArgsOf<T> &a) {
  return a.rows < 0 || a.vocab < 0 || a.totalRows < 0;
}

template <typename T> unsigned rowBlocks(const CrossEntropyArgsOf<T> &a) {
  return unsigned(std::min(a.rows, maxRowBlocks));
}

template <typename T> cudaError_t rowMax(const CrossEntropyArgsOf<T> &a, cudaStream_t stream) {
  if (invalid(a))
    return cudaErrorInvalidValue;
  if (a.rows == 0)
    return cudaSuccess;
  MIST_CE_LAUNCH(crossEntropyMaxKernel, a, stream, a);
  return cudaGetLastError();
}

template <typename T> cudaError_t rowSums(const CrossEntropyArgsOf<T> &a, cudaStream_t stream) {
  if (invalid(a))
    return cudaErrorInvalidValue;
  if (a.rows == 0)
    return cudaSuccess;
  MIST_CE_LAUNCH(crossEntropySumKernel, a, stream, a);
  return cudaGetLastError();
}

template <typename T>
cudaError_t loss(const CrossEntropyArgsOf<T> &a, float *loss, cudaStream_t stream) {
  if (invalid(a) || (a.rows > 0 && a.totalRows == 0))
    return cudaErrorInvalidValue;
  if (a.rows == 0)
    return cudaMemsetAsync(loss, 0, sizeof(float), stream);
  crossEntropyLossKernel<T><<<1, lossThreads, 0, stream>>>(a, loss);
  return cudaGetLastError();
}

template <typename T> cudaError_t backward(const CrossEntropyArgsOf<T> &a, cudaStream_t stream) {
  if (invalid(a))
    return cudaErrorInvalidValue;
  if (a.rows == 0 || a.vocab == 0)
    return cudaSuccess;
  MIST_CE_LAUNCH(crossEntropyBwdKernel, a, stream, a, a.dloss / float(a.totalRows), nullptr);
  return cudaGetLastError();
}

template <typename T>
cudaError_t backward(const CrossEntropyArgsOf<T> &a, const float *dloss, cudaStream_t stream) {
  if (invalid(a) || !dloss)
    return cudaErrorInvalidValue;
  if (a.rows == 0 || a.vocab == 0)
    return cudaSuccess;
  MIST_CE_LAUNCH(crossEntropyBwdKernel, a, stream, a, 0.f, dloss);
  return cudaGetLastError();
}

#undef MIST_CE_LAUNCH

} // namespace

cudaError_t crossEntropyMaxCuda(const CrossEntropyArgs &a, cudaStream_t s) { return rowMax(a, s); }
cudaError_t crossEntropySumCuda(const CrossEntropyArgs &a, cudaStream_t s) { return rowSums(a, s); }
cudaError_t crossEntropyLossCuda(const CrossEntropyArgs &a, float *l, cudaStream_t s) {
  return loss(a, l, s);
}
cudaError_t crossEntropyBwdCuda(const CrossEntropyArgs &a, cudaStream_t s) {
  return backward(a, s);
}
cudaError_t crossEntropyBwdCuda(const CrossEntropyArgs &a, const float *dloss, cudaStream_t s) {
  return backward(a, dloss, s);
}
cudaError_t crossEntropyMaxCuda(const CrossEntropyBf16Args &a, cudaStream_t s) {
  return rowMax(a, s);
}
cudaError_t crossEntropySumCuda(const CrossEntropyBf16Args &a, cudaStream_t s) {
  return rowSums(a, s);
}
cudaError_t crossEntropyBwdCuda(const CrossEntropyBf16Args &a, cudaStream_t s) {
  return backward(a, s);
}
cudaError_t crossEntropyBwdCuda(const CrossEntropyBf16Args &a, const float *dloss, cudaStream_t s) {
  return backward(a, dloss, s);
}

} // namespace mist::kernels
