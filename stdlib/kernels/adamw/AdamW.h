//===- AdamW.h - AdamW with fp32 master weights ---------------------------===//
#pragma once

#include "stdlib/kernels/Tensor.h"

namespace mist::kernels {

/// One step on n parameters: m, v and the fp32 master weights are updated
/// in place; `param` receives the new weights in the training dtype (fp32
/// for now, in the CPU reference and the CUDA kernel alike; a bf16 variant
/// comes with the bf16 trainer). Gradients are scaled by `gradScale`
/// first (clipping and micro-batch averaging).
struct AdamWArgs {
  float *master, *m, *v;
  float *param;
  const float *grad;
  Index n;
  float lr, beta1, beta2, eps, weightDecay, gradScale = 1.f;
  int step; ///< 1-based, for bias correction
};
void adamWRef(const AdamWArgs &a);

} // namespace mist::kernels
