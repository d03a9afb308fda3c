//===- AdamWRef.cpp - CPU reference of AdamW ------------------------------===//
#include "stdlib/kernels/adamw/AdamW.h"

#include <cmath>

namespace mist::kernels {

void adamWRef(const AdamWArgs &a) {
  double c1 = 1 - std::pow(double(a.beta1), a.step), c2 = 1 - std::pow(double(a.beta2), a.step);
  for (Index i = 0; i < a.n; ++i) {
    float g = a.grad[i] * a.gradScale;
    a.m[i] = a.beta1 * a.m[i] + (1 - a.beta1) * g;
    a.v[i] = a.beta2 * a.v[i] + (1 - a.beta2) * g * g;
    float mhat = float(a.m[i] / c1), vhat = float(a.v[i] / c2);
    a.master[i] -= a.lr * (mhat / (std::sqrt(vhat) + a.eps) + a.weightDecay * a.master[i]);
    a.param[i] = a.master[i];
  }
}

} // namespace mist::kernels
