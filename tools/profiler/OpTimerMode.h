//===- OpTimerMode.h - How the profiler times linear backward passes ------===//
#pragma once

namespace mist::profiler {

/// What `linear_grad` and `lm_head_grad` are timed as (tools/profiler/OpTimer.h).
enum class LinearGradMode {
  Bf16Gemms, ///< the backward's two GEMMs as bf16 GEMMs (the default)
  Tf32,      ///< linearBwdCuda on fp32 data with tf32 tensor cores
  Fp32,      ///< linearBwdCuda on fp32 data, exact fp32
};

} // namespace mist::profiler
