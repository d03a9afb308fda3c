//===- Activation.cu - CUDA elementwise GELU, SiLU, product and sum -------===//
/// \file
/// One grid-stride kernel per op, the formulas of ActivationRef.cpp in fp32
/// (tanhf / erfcf / expf, no fast-math
/// intrinsics).
//===----------------------------------------------------------------------===//
#include "stdlib/kernels/Storage.cuh"
#include "stdlib/kernels/activation/ActivationCuda.h"

#include <algorithm>
#include <cuda_runtime.h>

namespace mist::kernels {

namespace {

constexpr float geluScale = 0.7978845608028654f;      // sqrt(2 / pi)
constexpr float normalPdfScale = 0.3989422804014327f; // 1 / sqrt(2 pi)
constexpr float sqrtHalf = 0.7071067811865476f;       // 1 / sqrt 2
constexpr int threads = 256;
constexpr Index maxBlocks = 4096; // the grid-stride loop covers the rest

enum class Op {
  GeluFwd,
  GeluBwd,
  GeluExactFwd,
  GeluExactBwd,
  SiluFwd,
  SiluBwd,
  MulFwd,
  MulBwd,
  AddFwd
};

template <Op op, typename T> __global__ void elementwiseKernel(ElementwiseArgsOf<T> x) {
  Index stride = Index(gridDim.x) * blockDim.x;
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < x.n; i += stride) {
    if constexpr (op == Op::GeluFwd) {
      float v = load(x.a, i);
      store(x.out, i, 0.5f * v * (1.f + tanhf(geluScale * (v + 0.044715f * v * v * v))));
    } else if constexpr (op == Op::GeluBwd) {
      float v = load(x.a, i);
      float u = geluScale * (v + 0.044715f * v * v * v);
      float th = tanhf(u);
      float du = geluScale * (1.f + 3.f * 0.044715f * v * v);
      store(x.da, i, load(x.dout, i) * (0.5f * (1.f + th) + 0.5f * v * (1.f - th * th) * du));
    } else if constexpr (op == Op::GeluExactFwd) {
      float v = load(x.a, i);
      store(x.out, i, 0.5f * v * erfcf(-v * sqrtHalf));
    } else if constexpr (op == Op::GeluExactBwd) {
      float v = load(x.a, i);
      float cdf = 0.5f * erfcf(-v * sqrtHalf);
      store(x.da, i, load(x.dout, i) * (cdf + v * normalPdfScale * expf(-0.5f * v * v)));
    } else if constexpr (op == Op::SiluFwd) {
      float v = load(x.a, i);
      store(x.out, i, v / (1.f + expf(-v)));
    } else if constexpr (op == Op::SiluBwd) {
      float v = load(x.a, i);
      float sg = 1.f / (1.f + expf(-v));
      store(x.da, i, load(x.dout, i) * sg * (1.f + v * (1.f - sg)));
    } else if constexpr (op == Op::MulFwd) {
      store(x.out, i, load(x.a, i) * load(x.b, i));
    } else if constexpr (op == Op::MulBwd) {
      float dy = load(x.dout, i), a = load(x.a, i), b = load(x.b, i);
      store(x.da, i, dy * b);
      store(x.db, i, dy * a);
    } else {
      store(x.out, i, load(x.a, i) + load(x.b, i));
    }
  }
}

template <Op op, typename T>
cudaError_t launch(const ElementwiseArgsOf<T> &x, cudaStream_t stream) {
  if (x.n < 0)
    return cudaErrorInvalidValue;
  if (x.n == 0)
    return cudaSuccess;
  Index blocks = std::min((x.n + threads - 1) / threads, maxBlocks);
  elementwiseKernel<op, T><<<unsigned(blocks), threads, 0, stream>>>(x);
  return cudaGetLastError();
}

} // namespace

cudaError_t geluFwdCuda(const ElementwiseArgs &x, cudaStream_t stream) {
  return launch<Op::GeluFwd>(x, stream);
}
cudaError_t geluBwdCuda(const ElementwiseArgs &x, cudaStream_t stream) {
  return launch<Op::GeluBwd>(x, stream);
}
cudaError_t geluExactFwdCuda(const ElementwiseArgs &x, cudaStream_t stream) {
  return launch<Op::GeluExactFwd>(x, stream);
}
cudaError_t geluExactBwdCuda(const ElementwiseArgs &x, cudaStream_t stream) {
  return launch<Op::GeluExactBwd>(x, stream);
}
cudaError_t siluFwdCuda(const ElementwiseArgs &x, cudaStream_t stream) {
  return launch<Op::SiluFwd>(x, stream);
}
cudaError_t siluBwdCuda(const ElementwiseArgs &x, cudaStream_t stream) {
  return launch<Op::SiluBwd>(x, stream);
}
cudaError_t mulFwdCuda(const ElementwiseArgs &x, cudaStream_t stream) {
  return launch<Op::MulFwd>(x, stream);
}
cudaError_t mulBwdCuda(const ElementwiseArgs &x, cudaStream_t stream) {
  return launch<Op::MulBwd>(x, stream);
}
cudaError_t addFwdCuda(const ElementwiseArgs &x, cudaStream_t stream) {
  return launch<Op::AddFwd>(x, stream);
}
cudaError_t geluFwdCuda(const ElementwiseBf16Args &x, cudaStream_t stream) {
  return launch<Op::GeluFwd>(x, stream);
}
cudaError_t geluBwdCuda(const ElementwiseBf16Args &x, cudaStream_t stream) {
  return launch<Op::GeluBwd>(x, stream);
}
cudaError_t geluExactFwdCuda(const ElementwiseBf16Args &x, cudaStream_t stream) {
  return launch<Op::GeluExactFwd>(x, stream);
}
cudaError_t geluExactBwdCuda(const ElementwiseBf16Args &x, cudaStream_t stream) {
  return launch<Op::GeluExactBwd>(x, stream);
}
cudaError_t siluFwdCuda(const ElementwiseBf16Args &x, cudaStream_t stream) {
  return launch<Op::SiluFwd>(x, stream);
}
cudaError_t siluBwdCuda(const ElementwiseBf16Args &x, cudaStream_t stream) {
  return launch<Op::SiluBwd>(x, stream);
}
cudaError_t mulFwdCuda(const ElementwiseBf16Args &x, cudaStream_t stream) {
  return launch<Op::MulFwd>(x, stream);
}
cudaError_t mulBwdCuda(const ElementwiseBf16Args &x, cudaStream_t stream) {
  return launch<Op::MulBwd>(x, stream);
}
cudaError_t addFwdCuda(const ElementwiseBf16Args &x, cudaStream_t stream) {
  return launch<Op::AddFwd>(x, stream);
}

} // namespace mist::kernels
