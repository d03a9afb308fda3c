//===- LinearRef.cpp - CPU reference of the linear layer ------------------===//
#include "stdlib/kernels/linear/Linear.h"

namespace mist::kernels {

void linearFwdRef(const LinearArgs &a) {
  for (Index n = 0; n < a.rows; ++n)
    for (Index o = 0; o < a.outFeatures; ++o) {
      float acc = a.bias ? a.bias[o] : 0.f;
      for (Index i = 0; i < a.in; ++i)
        acc += a.inp[n * a.in + i] * a.weight[i * a.outFeatures + o];
      a.out[n * a.outFeatures + o] = acc;
    }
}

void linearBwdRef(const LinearArgs &a) {
  if (a.dinp)
    for (Index n = 0; n < a.rows; ++n)
      for (Index i = 0; i < a.in; ++i) {
        float acc = 0;
        for (Index o = 0; o < a.outFeatures; ++o)
          acc += a.dout[n * a.outFeatures + o] * a.weight[i * a.outFeatures + o];
        a.dinp[n * a.in + i] = acc;
      }
  for (Index n = 0; n < a.rows; ++n)
    for (Index o = 0; o < a.outFeatures; ++o) {
      float g = a.dout[n * a.outFeatures + o];
      if (a.dbias)
        a.dbias[o] += g;
      for (Index i = 0; i < a.in; ++i)
        a.dweight[i * a.outFeatures + o] += a.inp[n * a.in + i] * g;
    }
}

void lmHeadFwdRef(float *logits, const float *x, const float *table, Index rows, Index channels,
                  Index vocab) {
  for (Index n = 0; n < rows; ++n)
    for (Index v = 0; v < vocab; ++v) {
      double acc = 0;
      for (Index c = 0; c < channels; ++c)
        acc += double(x[n * channels + c]) * table[v * channels + c];
      logits[n * vocab + v] = float(acc);
    }
}

void lmHeadBwdRef(float *dx, float *dtable, const float *dlogits, const float *x,
                  const float *table, Index rows, Index channels, Index vocab) {
  for (Index n = 0; n < rows; ++n)
    for (Index c = 0; c < channels; ++c) {
      double acc = 0;
      for (Index v = 0; v < vocab; ++v)
        acc += double(dlogits[n * vocab + v]) * table[v * channels + c];
      dx[n * channels + c] = float(acc);
    }
  for (Index v = 0; v < vocab; ++v)
    for (Index c = 0; c < channels; ++c) {
      double acc = 0;
      for (Index n = 0; n < rows; ++n)
        acc += double(dlogits[n * vocab + v]) * x[n * channels + c];
      dtable[v * channels + c] += float(acc);
    }
}

} // namespace mist::kernels
