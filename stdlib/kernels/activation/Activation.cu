//===- Activation.cu - CUDA elementwise GELU, SiLU, product and sum -------===//
/// \file
/// One grid-stride kernel per op; the per-element formulas are
/// ActivationMath.h's (those of ActivationRef.cpp in fp32, checked on the CPU
/// by tests/unit/KernelMathTest.cpp). bf16 tensors whose pointers are all
/// 16-byte aligned are read and written 8 values per access (VectorRow.cuh),
/// the last n % 8 values one by one.
//===----------------------------------------------------------------------===//
#include "stdlib/kernels/Storage.cuh"
#include "stdlib/kernels/VectorRow.cuh"
#include "stdlib/kernels/activation/ActivationCuda.h"
#include "stdlib/kernels/activation/ActivationMath.h"

#include <algorithm>
#include <cuda_runtime.h>
#include <type_traits>

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

using namespace mist::kernels::cuda;

/// What each op reads besides `a`, and writes: `out` (forward) or `da`
/// (backward), and `db` for the product's backward.
constexpr bool readsB(Op op) { return op == Op::MulFwd || op == Op::MulBwd || op == Op::AddFwd; }
constexpr bool isBackward(Op op) {
  return op == Op::GeluBwd || op == Op::GeluExactBwd || op == Op::SiluBwd || op == Op::MulBwd;
}
constexpr bool writesDb(Op op) { return op == Op::MulBwd; }

/// One element on widened values: `first` is out or da, `second` db.
template <Op op>
__device__ __forceinline__ void compute(float a, float b, float dy, float &first, float &second) {
  if constexpr (op == Op::GeluFwd) {
    first = math::geluTanh(a);
  } else if constexpr (op == Op::GeluBwd) {
    first = math::geluTanhGrad(a, dy);
  } else if constexpr (op == Op::GeluExactFwd) {
    first = math::geluExact(a);
  } else if constexpr (op == Op::GeluExactBwd) {
    first = math::geluExactGrad(a, dy);
  } else if constexpr (op == Op::SiluFwd) {
    first = math::silu(a);
  } else if constexpr (op == Op::SiluBwd) {
    first = math::siluGrad(a, dy);
  } else if constexpr (op == Op::MulFwd) {
    first = a * b;
  } else if constexpr (op == Op::MulBwd) {
    first = dy * b;
    second = dy * a;
  } else {
    first = a + b;
  }
}

/// Elements [begin, n) one by one, grid-stride.
template <Op op, typename T>
__device__ __forceinline__ void elementwiseTail(const ElementwiseArgsOf<T> &x, Index begin) {
  const Index stride = Index(gridDim.x) * blockDim.x;
  for (Index i = begin + Index(blockIdx.x) * blockDim.x + threadIdx.x; i < x.n; i += stride) {
    float first = 0.f, second = 0.f;
    compute<op>(load(x.a, i), readsB(op) ? load(x.b, i) : 0.f,
                isBackward(op) ? load(x.dout, i) : 0.f, first, second);
    store(isBackward(op) ? x.da : x.out, i, first);
    if constexpr (writesDb(op))
      store(x.db, i, second);
  }
}

template <Op op, typename T> __global__ void elementwiseKernel(ElementwiseArgsOf<T> x) {
  elementwiseTail<op>(x, 0);
}

/// bf16 with every pointer 16-byte aligned: whole vectors, then the tail.
template <Op op> __global__ void elementwiseVectorKernel(ElementwiseArgsOf<__nv_bfloat16> x) {
  const Index vectors = x.n / bf16PerVector, stride = Index(gridDim.x) * blockDim.x;
  for (Index v = Index(blockIdx.x) * blockDim.x + threadIdx.x; v < vectors; v += stride) {
    float a[8], b[8] = {}, dy[8] = {}, first[8], second[8] = {};
    loadVector(x.a, v, a);
    if constexpr (readsB(op))
      loadVector(x.b, v, b);
    if constexpr (isBackward(op))
      loadVector(x.dout, v, dy);
#pragma unroll
    for (int i = 0; i < 8; ++i)
      compute<op>(a[i], b[i], dy[i], first[i], second[i]);
    storeVector(isBackward(op) ? x.da : x.out, v, first);
    if constexpr (writesDb(op))
      storeVector(x.db, v, second);
  }
  elementwiseTail<op>(x, vectors * bf16PerVector);
}

template <Op op, typename T>
cudaError_t launch(const ElementwiseArgsOf<T> &x, cudaStream_t stream) {
  if (x.n < 0)
    return cudaErrorInvalidValue;
  if (x.n == 0)
    return cudaSuccess;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (aligned16(x.out, x.a, x.b, x.da, x.db, x.dout)) {
      const Index vectors = std::max<Index>(1, x.n / bf16PerVector);
      const Index blocks = std::min((vectors + threads - 1) / threads, maxBlocks);
      elementwiseVectorKernel<op><<<unsigned(blocks), threads, 0, stream>>>(x);
      return cudaGetLastError();
    }
  }
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
