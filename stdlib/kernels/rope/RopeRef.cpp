//===- RopeRef.cpp - CPU reference of the rotary embedding ----------------===//
#include "stdlib/kernels/rope/Rope.h"

#include <cmath>

namespace mist::kernels {

void ropeRef(const RopeArgs &a) {
  for (Index b = 0; b < a.batch; ++b)
    for (Index t = 0; t < a.seq; ++t)
      for (Index h = 0; h < a.heads; ++h) {
        Index base = ((b * a.seq + t) * a.heads + h) * a.headDim;
        const Index R = a.rotated();
        for (Index i = R; i < a.headDim; ++i) // partial rotary: the rest passes through
          a.out[base + i] = a.inp[base + i];
        for (Index i = 0; i + 1 < R; i += 2) {
          double angle = t * std::pow(double(a.theta), -double(i) / double(R));
          float c = float(std::cos(angle)), s = float(std::sin(angle)) * (a.inverse ? -1.f : 1.f);
          float x0 = a.inp[base + i], x1 = a.inp[base + i + 1];
          a.out[base + i] = x0 * c - x1 * s;
          a.out[base + i + 1] = x0 * s + x1 * c;
        }
      }
}

} // namespace mist::kernels
