//===- Rope.cu - CUDA rotary position embedding ---------------------------===//
/// \file
/// One thread per (token, pair) computes the angle t * theta^(-2i/R) in
/// double, as the reference does (RopeMath.h, checked on the CPU by
/// tests/unit/KernelMathTest.cpp), rounds its cosine and sine to fp32, and
/// rotates that pair in every head; with partial rotary (R < D) it also
/// copies its share of the dims past R. An odd last rotated element is left
/// untouched, as in the reference.
//===----------------------------------------------------------------------===//
#include "stdlib/kernels/Storage.cuh"
#include "stdlib/kernels/rope/RopeCuda.h"
#include "stdlib/kernels/rope/RopeMath.h"

#include <algorithm>
#include <cuda_runtime.h>

namespace mist::kernels {

namespace {

constexpr int threads = 256;
constexpr Index maxBlocks = 4096; // the grid-stride loop covers the rest

template <typename T> __global__ void ropeKernel(RopeArgsOf<T> a) {
  const Index R = a.rotaryDim > 0 ? a.rotaryDim : a.headDim; // RopeArgs::rotated(), on the device
  const Index pairs = R / 2, total = a.batch * a.seq * pairs;
  Index stride = Index(gridDim.x) * blockDim.x;
  const Index rest = a.headDim - R, copies = a.batch * a.seq * a.heads * rest;
  for (Index k = Index(blockIdx.x) * blockDim.x + threadIdx.x; k < copies; k += stride) {
    Index at = (k / rest) * a.headDim + R + k % rest;
    a.out[at] = a.inp[at]; // exact in either type
  }
  for (Index k = Index(blockIdx.x) * blockDim.x + threadIdx.x; k < total; k += stride) {
    Index token = k / pairs, i = 2 * (k % pairs), t = token % a.seq;
    double sd, cd;
    sincos(math::ropeAngle(t, i, R, a.theta), &sd, &cd);
    float c = float(cd), s = float(sd) * (a.inverse ? -1.f : 1.f);
    for (Index h = 0; h < a.heads; ++h) {
      Index at = (token * a.heads + h) * a.headDim + i;
      float y0, y1;
      math::ropeRotate(load(a.inp, at), load(a.inp, at + 1), c, s, y0, y1);
      store(a.out, at, y0);
      store(a.out, at + 1, y1);
    }
  }
}

template <typename T> cudaError_t rope(const RopeArgsOf<T> &a, cudaStream_t stream) {
  if (a.batch < 0 || a.seq < 0 || a.heads < 0 || a.headDim < 0 || a.rotaryDim < 0 ||
      a.rotaryDim > a.headDim)
    return cudaErrorInvalidValue;
  Index total = a.batch * a.seq * std::max(a.rotated() / 2, a.headDim - a.rotated());
  if (total == 0 || a.heads == 0)
    return cudaSuccess;
  Index blocks = std::min((total + threads - 1) / threads, maxBlocks);
  ropeKernel<T><<<unsigned(blocks), threads, 0, stream>>>(a);
  return cudaGetLastError();
}

} // namespace

cudaError_t ropeCuda(const RopeArgs &a, cudaStream_t stream) { return rope(a, stream); }
cudaError_t ropeCuda(const RopeBf16Args &a, cudaStream_t stream) { return rope(a, stream); }

} // namespace mist::kernels
