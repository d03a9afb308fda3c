//===- Activation.cu - CUDA elementwise GELU, SiLU, product and sum -------===//
/// \file
/// One grid-stride kernel per op; the per-element formulas are
/// ActivationMath.h's (those of ActivationRef.cpp in fp32, checked on the CPU
/// by tests/unit/KernelMathTest.cpp).
//===----------------------------------------------------------------------===//
#include "stdlib/kernels/Storage.cuh"
#include "stdlib/kernels/activation/ActivationCuda.h"
#include "stdlib/kernels/activation/ActivationMath.h"

#include <algorithm>
#include <cuda_runtime.h>

namespace mist::kernels {

namespace {

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
      store(x.out, i, math::geluTanh(load(x.a, i)));
    } else if constexpr (op == Op::GeluBwd) {
      store(x.da, i, math::geluTanhGrad(load(x.a, i), load(x.dout, i)));
    } else if constexpr (op == Op::GeluExactFwd) {
      store(x.out, i, math::geluExact(load(x.a, i)));
    } else if constexpr (op == Op::GeluExactBwd) {
      store(x.da, i, math::geluExactGrad(load(x.a, i), load(x.dout, i)));
    } else if constexpr (op == Op::SiluFwd) {
      store(x.out, i, math::silu(load(x.a, i)));
    } else if constexpr (op == Op::SiluBwd) {
      store(x.da, i, math::siluGrad(load(x.a, i), load(x.dout, i)));
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
