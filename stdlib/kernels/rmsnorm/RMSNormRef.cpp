//===- RMSNormRef.cpp - CPU reference of RMSNorm --------------------------===//
#include "stdlib/kernels/rmsnorm/RMSNorm.h"

#include <cmath>

namespace mist::kernels {

void rmsNormFwdRef(const RMSNormArgs &a) {
  for (Index n = 0; n < a.rows; ++n) {
    const float *x = a.inp + n * a.channels;
    double ms = 0;
    for (Index c = 0; c < a.channels; ++c)
      ms += double(x[c]) * x[c];
    float s = float(1.0 / std::sqrt(ms / a.channels + a.eps));
    a.rstd[n] = s;
    for (Index c = 0; c < a.channels; ++c)
      a.out[n * a.channels + c] = x[c] * s * a.weight[c];
  }
}

void rmsNormBwdRef(const RMSNormArgs &a) {
  for (Index n = 0; n < a.rows; ++n) {
    const float *x = a.inp + n * a.channels, *dy = a.dout + n * a.channels;
    float s = a.rstd[n];
    // dx = s * g - x * s^3 * mean(g * x) with g = dy * w.
    double gx = 0;
    for (Index c = 0; c < a.channels; ++c)
      gx += double(dy[c]) * a.weight[c] * x[c];
    gx /= a.channels;
    for (Index c = 0; c < a.channels; ++c) {
      a.dinp[n * a.channels + c] = s * dy[c] * a.weight[c] - x[c] * s * s * s * float(gx);
      a.dweight[c] += dy[c] * x[c] * s;
    }
  }
}

} // namespace mist::kernels
