//===- Embedding.cu - CUDA token and position embeddings ------------------===//
/// \file
/// Grid-stride loops over the output elements (forward) or the gradient
/// elements (backward); consecutive threads take consecutive channels.
//===----------------------------------------------------------------------===//
#include "stdlib/kernels/Storage.cuh"
#include "stdlib/kernels/embedding/EmbeddingCuda.h"

#include <algorithm>
#include <cuda_runtime.h>

namespace mist::kernels {

namespace {

constexpr int threads = 256;
constexpr Index maxBlocks = 4096; // the grid-stride loop covers the rest

unsigned blocksFor(Index n) { return unsigned(std::min((n + threads - 1) / threads, maxBlocks)); }

template <typename T> __global__ void embeddingFwdKernel(EmbeddingArgsOf<T> a) {
  Index total = a.tokens * a.channels, stride = Index(gridDim.x) * blockDim.x;
  for (Index k = Index(blockIdx.x) * blockDim.x + threadIdx.x; k < total; k += stride) {
    Index i = k / a.channels, c = k % a.channels;
    Index row = Index(a.ids[i]) - a.vocabStart;
    store(a.out, k, row >= 0 && row < a.vocab ? load(a.table, row * a.channels + c) : 0.f);
  }
}

template <typename T> __global__ void embeddingBwdKernel(EmbeddingArgsOf<T> a) {
  Index total = a.tokens * a.channels, stride = Index(gridDim.x) * blockDim.x;
  for (Index k = Index(blockIdx.x) * blockDim.x + threadIdx.x; k < total; k += stride) {
    Index i = k / a.channels, c = k % a.channels;
    Index row = Index(a.ids[i]) - a.vocabStart;
    if (row >= 0 && row < a.vocab)
      atomicAdd(a.dtable + row * a.channels + c, load(a.dout, k));
  }
}

template <typename T> __global__ void positionEmbeddingFwdKernel(PositionEmbeddingArgsOf<T> a) {
  Index total = a.tokens * a.channels, stride = Index(gridDim.x) * blockDim.x;
  for (Index k = Index(blockIdx.x) * blockDim.x + threadIdx.x; k < total; k += stride) {
    Index i = k / a.channels, c = k % a.channels;
    a.out[k] = a.table[((a.firstToken + i) % a.seq) * a.channels + c]; // exact in either type
  }
}

// One thread per table element: it adds the rows at its position in row
// order (deterministic, no atomics).
template <typename T> __global__ void positionEmbeddingBwdKernel(PositionEmbeddingArgsOf<T> a) {
  Index table = a.seq * a.channels, stride = Index(gridDim.x) * blockDim.x;
  for (Index k = Index(blockIdx.x) * blockDim.x + threadIdx.x; k < table; k += stride) {
    Index t = k / a.channels, c = k % a.channels;
    float sum = a.dtable[k];
    for (Index i = ((t - a.firstToken) % a.seq + a.seq) % a.seq; i < a.tokens; i += a.seq)
      sum += load(a.dout, i * a.channels + c);
    a.dtable[k] = sum;
  }
}

template <typename T> cudaError_t embeddingFwd(const EmbeddingArgsOf<T> &a, cudaStream_t stream) {
  if (a.tokens < 0 || a.channels < 0 || a.vocab < 0)
    return cudaErrorInvalidValue;
  if (a.tokens == 0 || a.channels == 0)
    return cudaSuccess;
  embeddingFwdKernel<T><<<blocksFor(a.tokens * a.channels), threads, 0, stream>>>(a);
  return cudaGetLastError();
}

template <typename T> cudaError_t embeddingBwd(const EmbeddingArgsOf<T> &a, cudaStream_t stream) {
  if (a.tokens < 0 || a.channels < 0 || a.vocab < 0)
    return cudaErrorInvalidValue;
  if (a.tokens == 0 || a.channels == 0 || a.vocab == 0)
    return cudaSuccess;
  embeddingBwdKernel<T><<<blocksFor(a.tokens * a.channels), threads, 0, stream>>>(a);
  return cudaGetLastError();
}

template <typename T>
cudaError_t positionFwd(const PositionEmbeddingArgsOf<T> &a, cudaStream_t stream) {
  if (a.tokens < 0 || a.seq < 0 || a.channels < 0 || a.firstToken < 0)
    return cudaErrorInvalidValue;
  if (a.tokens == 0 || a.seq == 0 || a.channels == 0)
    return cudaSuccess;
  positionEmbeddingFwdKernel<T><<<blocksFor(a.tokens * a.channels), threads, 0, stream>>>(a);
  return cudaGetLastError();
}

template <typename T>
cudaError_t positionBwd(const PositionEmbeddingArgsOf<T> &a, cudaStream_t stream) {
  if (a.tokens < 0 || a.seq < 0 || a.channels < 0 || a.firstToken < 0)
    return cudaErrorInvalidValue;
  if (a.tokens == 0 || a.seq == 0 || a.channels == 0)
    return cudaSuccess;
  positionEmbeddingBwdKernel<T><<<blocksFor(a.seq * a.channels), threads, 0, stream>>>(a);
  return cudaGetLastError();
}

} // namespace

cudaError_t embeddingFwdCuda(const EmbeddingArgs &a, cudaStream_t s) { return embeddingFwd(a, s); }
cudaError_t embeddingBwdCuda(const EmbeddingArgs &a, cudaStream_t s) { return embeddingBwd(a, s); }
cudaError_t positionEmbeddingFwdCuda(const PositionEmbeddingArgs &a, cudaStream_t s) {
  return positionFwd(a, s);
}
cudaError_t positionEmbeddingBwdCuda(const PositionEmbeddingArgs &a, cudaStream_t s) {
  return positionBwd(a, s);
}
cudaError_t embeddingFwdCuda(const EmbeddingBf16Args &a, cudaStream_t s) {
  return embeddingFwd(a, s);
}
cudaError_t embeddingBwdCuda(const EmbeddingBf16Args &a, cudaStream_t s) {
  return embeddingBwd(a, s);
}
cudaError_t positionEmbeddingFwdCuda(const PositionEmbeddingBf16Args &a, cudaStream_t s) {
  return positionFwd(a, s);
}
cudaError_t positionEmbeddingBwdCuda(const PositionEmbeddingBf16Args &a, cudaStream_t s) {
  return positionBwd(a, s);
}

} // namespace mist::kernels
