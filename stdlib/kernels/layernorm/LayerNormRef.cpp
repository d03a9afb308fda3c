//===- LayerNormRef.cpp - CPU reference of LayerNorm ----------------------===//
#include "stdlib/kernels/layernorm/LayerNorm.h"

#include <cmath>

namespace mist::kernels {

void layerNormFwdRef(const LayerNormArgs &a) {
  for (Index n = 0; n < a.rows; ++n) {
    const float *x = a.inp + n * a.channels;
    double m = 0, v = 0;
    for (Index c = 0; c < a.channels; ++c)
      m += x[c];
    m /= a.channels;
    for (Index c = 0; c < a.channels; ++c)
      v += (x[c] - m) * (x[c] - m);
    v /= a.channels;
    float s = float(1.0 / std::sqrt(v + a.eps));
    a.mean[n] = float(m);
    a.rstd[n] = s;
    for (Index c = 0; c < a.channels; ++c)
      a.out[n * a.channels + c] = (x[c] - float(m)) * s * a.weight[c] + (a.bias ? a.bias[c] : 0.f);
  }
}

void layerNormBwdRef(const LayerNormArgs &a) {
  for (Index n = 0; n < a.rows; ++n) {
    const float *x = a.inp + n * a.channels, *dy = a.dout + n * a.channels;
    float m = a.mean[n], s = a.rstd[n];
    // dx = s * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w.
    double gMean = 0, gxMean = 0;
    for (Index c = 0; c < a.channels; ++c) {
      float xhat = (x[c] - m) * s, g = dy[c] * a.weight[c];
      gMean += g;
      gxMean += g * xhat;
    }
    gMean /= a.channels;
    gxMean /= a.channels;
    for (Index c = 0; c < a.channels; ++c) {
      float xhat = (x[c] - m) * s, g = dy[c] * a.weight[c];
      a.dinp[n * a.channels + c] = s * (g - float(gMean) - xhat * float(gxMean));
      a.dweight[c] += dy[c] * xhat;
      if (a.dbias)
        a.dbias[c] += dy[c];
    }
  }
}

} // namespace mist::kernels
