//===- OpTimerMode.h - How the profiler times the linear layers -----------===//
#pragma once

namespace mist::profiler {

/// What `linear`, `lm_head` and their `_grad` ops are timed as
/// (tools/profiler/OpTimer.h): as a bf16 trainer would run them, or as the
/// fp32 GPU trainer does (fp32 data through linearFwdCuda / linearBwdCuda).
enum class LinearGradMode {
  Bf16Gemms, ///< the bf16 trainer's kernels: bf16 GEMMs and backward, bf16 ops (the default)
  Tf32,      ///< fp32 data with tf32 tensor cores (the GPU trainer's math)
  Fp32,      ///< fp32 data, exact fp32
};

} // namespace mist::profiler
