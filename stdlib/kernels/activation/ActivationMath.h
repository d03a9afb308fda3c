//===- ActivationMath.h - The elementwise ops' formulas, GPU and CPU ------===//
/// \file
/// What the CUDA elementwise kernels (Activation.cu) compute per element, in
/// fp32 with tanhf / erfcf / expf (no fast-math intrinsics): the formulas of
/// ActivationRef.cpp. One definition for the device and the host
/// (HostDevice.h), so that a CPU test checks the GPU's formulas.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/HostDevice.h"

#include <math.h>

namespace mist::kernels::math {

inline constexpr float geluScale = 0.7978845608028654f;      // sqrt(2 / pi)
inline constexpr float geluCubic = 0.044715f;                // GPT-2's tanh approximation
inline constexpr float normalPdfScale = 0.3989422804014327f; // 1 / sqrt(2 pi)
inline constexpr float sqrtHalf = 0.7071067811865476f;       // 1 / sqrt 2

/// GELU, tanh approximation (GPT-2/3).
MIST_HOST_DEVICE float geluTanh(float v) {
  return 0.5f * v * (1.f + tanhf(geluScale * (v + geluCubic * v * v * v)));
}

/// dy times the derivative of geluTanh at v.
MIST_HOST_DEVICE float geluTanhGrad(float v, float dy) {
  float u = geluScale * (v + geluCubic * v * v * v);
  float th = tanhf(u);
  float du = geluScale * (1.f + 3.f * geluCubic * v * v);
  return dy * (0.5f * (1.f + th) + 0.5f * v * (1.f - th * th) * du);
}

/// GELU, exact: v Phi(v).
MIST_HOST_DEVICE float geluExact(float v) { return 0.5f * v * erfcf(-v * sqrtHalf); }

/// dy times the derivative of geluExact at v: Phi(v) + v phi(v).
MIST_HOST_DEVICE float geluExactGrad(float v, float dy) {
  float cdf = 0.5f * erfcf(-v * sqrtHalf);
  return dy * (cdf + v * normalPdfScale * expf(-0.5f * v * v));
}

/// SiLU: v sigmoid(v).
MIST_HOST_DEVICE float silu(float v) { return v / (1.f + expf(-v)); }

/// dy times the derivative of silu at v.
MIST_HOST_DEVICE float siluGrad(float v, float dy) {
  float sg = 1.f / (1.f + expf(-v));
  return dy * sg * (1.f + v * (1.f - sg));
}

} // namespace mist::kernels::math
