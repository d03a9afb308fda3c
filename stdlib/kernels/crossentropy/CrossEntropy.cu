//===- CrossEntropy.cu - CUDA vocab-parallel cross-entropy ----------------===//
/// \file
/// Max, sum and backward run one block per row, with warp-shuffle block
/// reductions in fp32 (the reference sums exp in double); the loss is one
/// block summing the rows in double.
//===----------------------------------------------------------------------===//
#include "stdlib/kernels/crossentropy/CrossEntropyCuda.h"

#include "stdlib/kernels/BlockReduce.cuh"

#include <algorithm>
#include <cuda_runtime.h>

namespace mist::kernels {

namespace {

using namespace mist::kernels::cuda;

constexpr int rowBlockThreads = 512;
constexpr int lossThreads = 256;
__global__ void crossEntropyMaxKernel(CrossEntropyArgs a) {
  for (Index n = blockIdx.x; n < a.rows; n += gridDim.x) {
    const float *logits = a.logits + n * a.vocab;
    float m = -INFINITY;
    for (Index v = threadIdx.x; v < a.vocab; v += blockDim.x)
      m = fmaxf(m, logits[v]);
    m = blockReduce(m, -INFINITY, Max());
    if (threadIdx.x == 0)
      a.rowMax[n] = m;
  }
}

__global__ void crossEntropySumKernel(CrossEntropyArgs a) {
  for (Index n = blockIdx.x; n < a.rows; n += gridDim.x) {
    const float *logits = a.logits + n * a.vocab;
    float m = a.rowMax[n], s = 0.f;
    for (Index v = threadIdx.x; v < a.vocab; v += blockDim.x)
      s += expf(logits[v] - m);
    s = blockReduce(s, 0.f, Sum());
    if (threadIdx.x == 0) {
      a.sumExp[n] = s;
      Index t = Index(a.targets[n]) - a.vocabStart;
      a.targetLogit[n] = t >= 0 && t < a.vocab ? logits[t] : 0.f;
    }
  }
}

__global__ void crossEntropyLossKernel(CrossEntropyArgs a, float *loss) {
  double sum = 0;
  for (Index n = threadIdx.x; n < a.rows; n += blockDim.x)
    sum += log(double(a.sumExp[n])) + a.rowMax[n] - a.targetLogit[n];
  sum = blockReduce(sum, 0.0, Sum());
  if (threadIdx.x == 0)
    *loss = float(sum / double(a.totalRows));
}

/// scale = dloss / totalRows, or computed here from `*dloss` when not null.
__global__ void crossEntropyBwdKernel(CrossEntropyArgs a, float scale, const float *dloss) {
  if (dloss)
    scale = *dloss / float(a.totalRows);
  for (Index n = blockIdx.x; n < a.rows; n += gridDim.x) {
    const float *logits = a.logits + n * a.vocab;
    float *dlogits = a.dlogits + n * a.vocab;
    float m = a.rowMax[n], inv = 1.f / a.sumExp[n];
    Index t = Index(a.targets[n]) - a.vocabStart;
    for (Index v = threadIdx.x; v < a.vocab; v += blockDim.x) {
      float p = expf(logits[v] - m) * inv;
      dlogits[v] = (p - (v == t ? 1.f : 0.f)) * scale;
    }
  }
}

bool invalid(const CrossEntropyArgs &a) { return a.rows < 0 || a.vocab < 0 || a.totalRows < 0; }

unsigned rowBlocks(const CrossEntropyArgs &a) { return unsigned(std::min(a.rows, maxRowBlocks)); }

} // namespace

cudaError_t crossEntropyMaxCuda(const CrossEntropyArgs &a, cudaStream_t stream) {
  if (invalid(a))
    return cudaErrorInvalidValue;
  if (a.rows == 0)
    return cudaSuccess;
  crossEntropyMaxKernel<<<rowBlocks(a), rowBlockThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t crossEntropySumCuda(const CrossEntropyArgs &a, cudaStream_t stream) {
  if (invalid(a))
    return cudaErrorInvalidValue;
  if (a.rows == 0)
    return cudaSuccess;
  crossEntropySumKernel<<<rowBlocks(a), rowBlockThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t crossEntropyLossCuda(const CrossEntropyArgs &a, float *loss, cudaStream_t stream) {
  if (invalid(a) || (a.rows > 0 && a.totalRows == 0))
    return cudaErrorInvalidValue;
  if (a.rows == 0)
    return cudaMemsetAsync(loss, 0, sizeof(float), stream);
  crossEntropyLossKernel<<<1, lossThreads, 0, stream>>>(a, loss);
  return cudaGetLastError();
}

cudaError_t crossEntropyBwdCuda(const CrossEntropyArgs &a, cudaStream_t stream) {
  if (invalid(a))
    return cudaErrorInvalidValue;
  if (a.rows == 0 || a.vocab == 0)
    return cudaSuccess;
  crossEntropyBwdKernel<<<rowBlocks(a), rowBlockThreads, 0, stream>>>(
      a, a.dloss / float(a.totalRows), nullptr);
  return cudaGetLastError();
}

cudaError_t crossEntropyBwdCuda(const CrossEntropyArgs &a, const float *dloss,
                                cudaStream_t stream) {
  if (invalid(a) || !dloss)
    return cudaErrorInvalidValue;
  if (a.rows == 0 || a.vocab == 0)
    return cudaSuccess;
  crossEntropyBwdKernel<<<rowBlocks(a), rowBlockThreads, 0, stream>>>(a, 0.f, dloss);
  return cudaGetLastError();
}

} // namespace mist::kernels
