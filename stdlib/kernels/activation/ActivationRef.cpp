//===- ActivationRef.cpp - CPU reference of the elementwise ops -----------===//
#include "stdlib/kernels/activation/Activation.h"

#include <cmath>

namespace mist::kernels {

namespace {
constexpr float geluScale = 0.7978845608028654f;      // sqrt(2 / pi)
constexpr float normalPdfScale = 0.3989422804014327f; // 1 / sqrt(2 pi)
constexpr float sqrtHalf = 0.7071067811865476f;       // 1 / sqrt 2
} // namespace

void geluFwdRef(const ElementwiseArgs &x) {
  for (Index i = 0; i < x.n; ++i) {
    float v = x.a[i];
    x.out[i] = 0.5f * v * (1.f + std::tanh(geluScale * (v + 0.044715f * v * v * v)));
  }
}

void geluBwdRef(const ElementwiseArgs &x) {
  for (Index i = 0; i < x.n; ++i) {
    float v = x.a[i];
    float u = geluScale * (v + 0.044715f * v * v * v);
    float th = std::tanh(u);
    float du = geluScale * (1.f + 3.f * 0.044715f * v * v);
    x.da[i] = x.dout[i] * (0.5f * (1.f + th) + 0.5f * v * (1.f - th * th) * du);
  }
}

void geluExactFwdRef(const ElementwiseArgs &x) {
  for (Index i = 0; i < x.n; ++i) {
    float v = x.a[i];
    x.out[i] = 0.5f * v * std::erfc(-v * sqrtHalf);
  }
}

void geluExactBwdRef(const ElementwiseArgs &x) {
  for (Index i = 0; i < x.n; ++i) {
    float v = x.a[i];
    float cdf = 0.5f * std::erfc(-v * sqrtHalf);
    x.da[i] = x.dout[i] * (cdf + v * normalPdfScale * std::exp(-0.5f * v * v));
  }
}

void siluFwdRef(const ElementwiseArgs &x) {
  for (Index i = 0; i < x.n; ++i)
    x.out[i] = x.a[i] / (1.f + std::exp(-x.a[i]));
}

void siluBwdRef(const ElementwiseArgs &x) {
  for (Index i = 0; i < x.n; ++i) {
    float sg = 1.f / (1.f + std::exp(-x.a[i]));
    x.da[i] = x.dout[i] * sg * (1.f + x.a[i] * (1.f - sg));
  }
}

void mulFwdRef(const ElementwiseArgs &x) {
  for (Index i = 0; i < x.n; ++i)
    x.out[i] = x.a[i] * x.b[i];
}

void mulBwdRef(const ElementwiseArgs &x) {
  for (Index i = 0; i < x.n; ++i) {
    x.da[i] = x.dout[i] * x.b[i];
    x.db[i] = x.dout[i] * x.a[i];
  }
}

void addFwdRef(const ElementwiseArgs &x) {
  for (Index i = 0; i < x.n; ++i)
    x.out[i] = x.a[i] + x.b[i];
}

} // namespace mist::kernels
