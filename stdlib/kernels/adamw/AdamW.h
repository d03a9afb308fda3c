//===- AdamW.h - AdamW with fp32 master weights ---------------------------===//
#pragma once

#include "stdlib/kernels/Tensor.h"

namespace mist::kernels {

/// One step on n parameters: m, v and the fp32 master weights are updated
/// in place; `param` receives the new weights in the training dtype T
/// (float here; the CUDA kernels also write bf16, the master rounded once).
/// Gradients are scaled by `gradScale` first (clipping and micro-batch
/// averaging).
template <typename T> struct AdamWArgsOf {
  float *master, *m, *v;
  T *param;
  const float *grad;
  Index n;
  float lr, beta1, beta2, eps, weightDecay, gradScale = 1.f;
  int step; ///< 1-based, for bias correction
};
using AdamWArgs = AdamWArgsOf<float>;
void adamWRef(const AdamWArgs &a);

} // namespace mist::kernels
