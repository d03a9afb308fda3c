//===- Rope.cu - CUDA rotary position embedding ---------------------------===//
/// \file
/// One thread per (token, pair) computes the angle t * theta^(-2i/D) in
/// double, as the reference does (in fp32, t * theta^(...) loses about 1e-4
/// radian at t ~ 4096), rounds its cosine and sine to fp32, and rotates that
/// pair in every head. An odd last element of a head is left untouched, as
/// in the reference.
//===----------------------------------------------------------------------===//
#include "stdlib/kernels/rope/RopeCuda.h"

#include <algorithm>
#include <cuda_runtime.h>

namespace mist::kernels {

namespace {

constexpr int threads = 256;
constexpr Index maxBlocks = 4096; // the grid-stride loop covers the rest

__global__ void ropeKernel(RopeArgs a) {
  Index pairs = a.headDim / 2, total = a.batch * a.seq * pairs;
  Index stride = Index(gridDim.x) * blockDim.x;
  for (Index k = Index(blockIdx.x) * blockDim.x + threadIdx.x; k < total; k += stride) {
    Index token = k / pairs, i = 2 * (k % pairs), t = token % a.seq;
    double angle = double(t) * pow(double(a.theta), -double(i) / double(a.headDim));
    double sd, cd;
    sincos(angle, &sd, &cd);
    float c = float(cd), s = float(sd) * (a.inverse ? -1.f : 1.f);
    for (Index h = 0; h < a.heads; ++h) {
      Index at = (token * a.heads + h) * a.headDim + i;
      float x0 = a.inp[at], x1 = a.inp[at + 1];
      a.out[at] = x0 * c - x1 * s;
      a.out[at + 1] = x0 * s + x1 * c;
    }
  }
}

} // namespace

cudaError_t ropeCuda(const RopeArgs &a, cudaStream_t stream) {
  if (a.batch < 0 || a.seq < 0 || a.heads < 0 || a.headDim < 0)
    return cudaErrorInvalidValue;
  Index total = a.batch * a.seq * (a.headDim / 2);
  if (total == 0 || a.heads == 0)
    return cudaSuccess;
  Index blocks = std::min((total + threads - 1) / threads, maxBlocks);
  ropeKernel<<<unsigned(blocks), threads, 0, stream>>>(a);
  return cudaGetLastError();
}

} // namespace mist::kernels
