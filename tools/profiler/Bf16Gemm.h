//===- Bf16Gemm.h - A large bf16 GEMM: the compute workload ---------------===//
/// \file
/// C [m, n] = A [m, k] B [k, n] in bf16 with fp32 accumulation through the
/// stdlib's production linear forward (linearFwdBf16Cuda, cuBLASLt), on
/// random data, with its own cuBLASLt context (one per stream). The
/// profiler times it alone for the achieved bf16 rate (matmul_efficiency)
/// and runs it as the compute stream of the interference measurement.
//===----------------------------------------------------------------------===//
#pragma once

#include "tools/profiler/DeviceBuffer.h"

#include <cstdint>
#include <memory>
#include <string>

namespace mist::kernels {
class LinearContext;
}

namespace mist::profiler {

class Bf16Gemm {
public:
  Bf16Gemm(int64_t m, int64_t k, int64_t n, cudaStream_t stream);
  ~Bf16Gemm();
  Bf16Gemm(const Bf16Gemm &) = delete;
  Bf16Gemm &operator=(const Bf16Gemm &) = delete;

  /// Queues one GEMM on the stream given to the constructor.
  void launch();
  double flops() const { return 2.0 * m * k * n; }
  std::string shape() const; ///< "MxKxN"
  cudaStream_t stream() const { return s; }

private:
  int64_t m, k, n;
  cudaStream_t s;
  DeviceBuffer<__nv_bfloat16> a, b, c;
  std::unique_ptr<kernels::LinearContext> ctx;
};

} // namespace mist::profiler
