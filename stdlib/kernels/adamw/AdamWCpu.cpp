//===- AdamWCpu.cpp - Vectorized AdamW ------------------------------------===//
#include "stdlib/kernels/adamw/AdamWCpu.h"

#include "stdlib/kernels/cpu/Parallel.h"
#include "stdlib/kernels/cpu/VectorMath.h"

#include <cmath>

namespace mist::kernels {

namespace {

MIST_CPU_KERNEL void update(const AdamWArgs &a, float mScale, float vScale, Index begin,
                            Index end) {
  const float b1 = a.beta1, b2 = a.beta2;
#pragma omp simd
  for (Index i = begin; i < end; ++i) {
    float g = a.grad[i] * a.gradScale;
    float m = b1 * a.m[i] + (1 - b1) * g;
    float v = b2 * a.v[i] + (1 - b2) * g * g;
    a.m[i] = m;
    a.v[i] = v;
    float master = a.master[i] - a.lr * ((m * mScale) / (std::sqrt(v * vScale) + a.eps) +
                                         a.weightDecay * a.master[i]);
    a.master[i] = master;
    a.param[i] = master;
  }
}

} // namespace

void adamWCpu(const AdamWArgs &a) {
  const float mScale = float(1 / (1 - std::pow(double(a.beta1), a.step)));
  const float vScale = float(1 / (1 - std::pow(double(a.beta2), a.step)));
  cpu::parallelFor(a.n, 1 << 15,
                   [&](Index begin, Index end) { update(a, mScale, vScale, begin, end); });
}

} // namespace mist::kernels
