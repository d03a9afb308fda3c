//===- Bf16Gemm.cpp - A large bf16 GEMM: the compute workload -------------===//
#include "tools/profiler/Bf16Gemm.h"

#include "stdlib/kernels/linear/LinearCuda.h"

namespace mist::profiler {

Bf16Gemm::Bf16Gemm(int64_t m, int64_t k, int64_t n, cudaStream_t stream)
    : m(m), k(k), n(n), s(stream), a(m * k), b(k * n), c(m * n),
      ctx(std::make_unique<kernels::LinearContext>()) {
  fillRandom(a.get(), a.size(), 11, 1.f, s);
  fillRandom(b.get(), b.size(), 12, 1.f, s);
  checkCuda(cudaStreamSynchronize(s), "fill");
}

Bf16Gemm::~Bf16Gemm() = default;

void Bf16Gemm::launch() {
  // LinearArgs' convention: out [rows, outF] = inp [rows, in] * weight [in, outF].
  checkCublas(kernels::linearFwdBf16Cuda(c.get(), a.get(), b.get(),
                                         static_cast<const __nv_bfloat16 *>(nullptr), m, k, n, s,
                                         ctx.get()),
              "linearFwdBf16Cuda");
}

std::string Bf16Gemm::shape() const {
  return std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n);
}

} // namespace mist::profiler
