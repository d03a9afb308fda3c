//===- AdamWMath.h - One element's AdamW update, GPU and CPU --------------===//
/// \file
/// What the CUDA AdamW kernels (AdamW.cu) compute per element, in fp32: the
/// update of AdamWRef.cpp, except that the bias corrections 1 - beta^step
/// (computed on the host in double, as the reference does) are applied as
/// fp32 reciprocals, a multiply instead of the reference's double division:
/// a rounding-level difference. One definition for the device and the host
/// (HostDevice.h), so that a CPU test checks the GPU's update.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/HostDevice.h"

#include <cmath>

namespace mist::kernels::math {

struct AdamWHyper {
  float lr, beta1, beta2, eps, weightDecay, gradScale;
  float invC1, invC2; ///< 1 / (1 - beta^step)
};

/// The step's constants, on the host (the corrections in double).
inline AdamWHyper adamWHyper(float lr, float beta1, float beta2, float eps, float weightDecay,
                             float gradScale, int step) {
  double c1 = 1 - std::pow(double(beta1), step), c2 = 1 - std::pow(double(beta2), step);
  return {lr, beta1, beta2, eps, weightDecay, gradScale, float(1 / c1), float(1 / c2)};
}

/// a * b and a + b rounded on their own: on the device never merged into
/// a fused multiply-add, which nvcc does or not depending on the kernel it
/// inlines into (the single- and multi-tensor kernels once differed by an
/// ulp of v), so that every kernel computes the reference's uncontracted
/// expression bit for bit.
MIST_HOST_DEVICE float mulRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
MIST_HOST_DEVICE float addRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

/// Updates the moments and the fp32 master of one element from its gradient
/// and returns the new master (the caller stores it, rounded, as the weight).
MIST_HOST_DEVICE float adamWStep(const AdamWHyper &h, float grad, float &m, float &v,
                                 float &master) {
  float g = mulRn(grad, h.gradScale);
  m = addRn(mulRn(h.beta1, m), mulRn(1 - h.beta1, g));
  v = addRn(mulRn(h.beta2, v), mulRn(mulRn(1 - h.beta2, g), g));
  float mhat = mulRn(m, h.invC1), vhat = mulRn(v, h.invC2);
  float update = addRn(mhat / addRn(sqrtf(vhat), h.eps), mulRn(h.weightDecay, master));
  master = addRn(master, -mulRn(h.lr, update));
  return master;
}

} // namespace mist::kernels::math
