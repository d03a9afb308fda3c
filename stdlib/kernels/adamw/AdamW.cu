//===- AdamW.cu - CUDA AdamW with fp32 master weights ---------------------===//
/// \file
/// The update of AdamWRef.cpp per element in fp32 (AdamWMath.h: the bias
/// corrections as fp32 reciprocals of the host's double ones; checked on the
/// CPU by tests/unit/KernelMathTest.cpp), over one tensor or many.
//===----------------------------------------------------------------------===//
#include "stdlib/kernels/Storage.cuh"
#include "stdlib/kernels/adamw/AdamWCuda.h"
#include "stdlib/kernels/adamw/AdamWMath.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cuda_runtime.h>

namespace mist::kernels {

namespace {

constexpr int threads = 256;
constexpr Index maxBlocks = 4096;       // the grid-stride loop covers the rest
constexpr Index multiBlockElems = 1024; // elements per block in the multi-tensor kernel

using math::AdamWHyper;

template <typename T>
__device__ void update(const AdamWHyper &h, float *master, float *m, float *v, T *param,
                       const float *grad, Index i) {
  // bf16 weights: the fp32 master rounded once
  store(param, i, math::adamWStep(h, grad[i], m[i], v[i], master[i]));
}

template <typename T> __global__ void adamWKernel(AdamWArgsOf<T> a, AdamWHyper h) {
  Index stride = Index(gridDim.x) * blockDim.x;
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n; i += stride)
    update(h, a.master, a.m, a.v, a.param, a.grad, i);
}

/// Block b belongs to the tensor k with blockStart[k] <= b < blockStart[k+1]
/// and updates its elements [(b - blockStart[k]) * multiBlockElems, + multiBlockElems).
template <typename T> struct MultiLaunch {
  AdamWMultiTensorArgsOf<T> args;
  AdamWHyper h;
  unsigned blockStart[adamWMaxTensors + 1];
};

template <typename T> __global__ void adamWMultiTensorKernel(MultiLaunch<T> l) {
  unsigned b = blockIdx.x;
  int k = 0;
  while (k + 1 < l.args.count && b >= l.blockStart[k + 1])
    ++k;
  Index begin = Index(b - l.blockStart[k]) * multiBlockElems;
  Index end = std::min(l.args.n[k], begin + multiBlockElems);
  for (Index i = begin + threadIdx.x; i < end; i += blockDim.x)
    update(l.h, l.args.master[k], l.args.m[k], l.args.v[k], l.args.param[k], l.args.grad[k], i);
}

static_assert(sizeof(MultiLaunch<float>) <= 4096, "the kernel parameter limit of older toolkits");

template <typename T> cudaError_t adamW(const AdamWArgsOf<T> &a, cudaStream_t stream) {
  if (a.n < 0 || a.step < 1)
    return cudaErrorInvalidValue;
  if (a.n == 0)
    return cudaSuccess;
  Index blocks = std::min((a.n + threads - 1) / threads, maxBlocks);
  adamWKernel<T><<<unsigned(blocks), threads, 0, stream>>>(
      a, math::adamWHyper(a.lr, a.beta1, a.beta2, a.eps, a.weightDecay, a.gradScale, a.step));
  return cudaGetLastError();
}

template <typename T>
cudaError_t adamWMultiTensor(const AdamWMultiTensorArgsOf<T> &a, cudaStream_t stream) {
  if (a.count < 0 || a.count > adamWMaxTensors || a.step < 1)
    return cudaErrorInvalidValue;
  MultiLaunch<T> l;
  l.args = a;
  l.h = math::adamWHyper(a.lr, a.beta1, a.beta2, a.eps, a.weightDecay, a.gradScale, a.step);
  Index blocks = 0;
  for (int k = 0; k < a.count; ++k) {
    if (a.n[k] < 0)
      return cudaErrorInvalidValue;
    l.blockStart[k] = unsigned(blocks);
    blocks += (a.n[k] + multiBlockElems - 1) / multiBlockElems;
    if (blocks > INT_MAX)
      return cudaErrorInvalidValue;
  }
  l.blockStart[a.count] = unsigned(blocks);
  if (blocks == 0)
    return cudaSuccess;
  adamWMultiTensorKernel<T><<<unsigned(blocks), threads, 0, stream>>>(l);
  return cudaGetLastError();
}

} // namespace

cudaError_t adamWCuda(const AdamWArgs &a, cudaStream_t s) { return adamW(a, s); }
cudaError_t adamWCuda(const AdamWBf16Args &a, cudaStream_t s) { return adamW(a, s); }
cudaError_t adamWMultiTensorCuda(const AdamWMultiTensorArgs &a, cudaStream_t s) {
  return adamWMultiTensor(a, s);
}
cudaError_t adamWMultiTensorCuda(const AdamWMultiTensorBf16Args &a, cudaStream_t s) {
  return adamWMultiTensor(a, s);
}

} // namespace mist::kernels
