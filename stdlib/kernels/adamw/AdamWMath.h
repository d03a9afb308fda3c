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

/// Updates the moments and the fp32 master of one element from its gradient
/// and returns the new master (the caller stores it, rounded, as the weight).
MIST_HOST_DEVICE float adamWStep(const AdamWHyper &h, float grad, float &m, float &v,
                                 float &master) {
  float g = grad * h.gradScale;
  m = h.beta1 * m + (1 - h.beta1) * g;
  v = h.beta2 * v + (1 - h.beta2) * g * g;
  float mhat = m * h.invC1, vhat = v * h.invC2;
  master -= h.lr * (mhat / (sqrtf(vhat) + h.eps) + h.weightDecay * master);
  return master;
}

} // namespace mist::kernels::math
