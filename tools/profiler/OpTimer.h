//===- OpTimer.h - Time one IR op at one shape with the stdlib kernels ----===//
/// \file
/// Maps an entry of a shapes file (IR op name, operand shapes, attributes)
/// to calls of the CUDA kernels of stdlib/kernels on random data of that
/// shape, and times them (EventTimer: median of N after warm-up). Operand
/// meanings follow docs/ir.md section 5 and runtime/ops/CpuOps.h:
///
///   linear, lm_head          by default one bf16 GEMM (linearFwdBf16Cuda, bf16
///                            out); with LinearGradMode::Fp32 / Tf32
///                            linearFwdCuda on fp32 data (the fp32 trainer's)
///   linear_grad, lm_head_grad  by default the backward's two GEMMs as bf16
///                            GEMMs of the same sizes (dx in bf16, dW in fp32)
///                            through linearFwdBf16Cuda, standing in for the
///                            bf16 backward that does not exist yet; with
///                            LinearGradMode::Fp32 / Tf32 linearBwdCuda itself
///                            (fp32 data); bias gradients are not included
///   attention(_grad)         attentionFwdCuda / attentionBwdCuda (fp32,
///                            flash; head dims 64 and 128)
///   layernorm, rmsnorm, rope, gelu, silu, mul, add, grad_add, embedding,
///   position_embedding_grad, cross_entropy and their _grad ops
///                            the fp32 kernel and its backward entry point
///
/// Everything but the GEMMs is fp32, as the kernels are: the times are those
/// of mistc's own kernels, not of a bf16 library. Ops without a kernel
/// (dropout, tp_copy), or whose shape key does not determine the work
/// (position_embedding: its key is the table, without the micro-batch), or
/// whose attributes the kernels do not support, are not timed; the caller
/// lists them and the performance model prices them by the roofline.
//===----------------------------------------------------------------------===//
#pragma once

#include "tools/profiler/OpTimerMode.h"
#include "tools/profiler/ProfileInputs.h"
#include "tools/profiler/ShapesFile.h"

#include <cuda_runtime_api.h>
#include <memory>
#include <string>

namespace mist::kernels {
class LinearContext;
}

namespace mist::profiler {

struct OpTimerOptions {
  int warmup = 3;
  int repeats = 20;
  LinearGradMode linearGrad = LinearGradMode::Bf16Gemms;
};

class OpTimer {
public:
  OpTimer(const OpTimerOptions &opts, cudaStream_t stream);
  ~OpTimer();
  OpTimer(const OpTimer &) = delete;
  OpTimer &operator=(const OpTimer &) = delete;

  /// Allocates the entry's buffers, fills them, times the op, frees them.
  OpTime time(const ShapeEntry &e);

private:
  OpTimerOptions opts;
  cudaStream_t stream;
  std::unique_ptr<kernels::LinearContext> linear;
};

} // namespace mist::profiler
