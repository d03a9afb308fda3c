//===- RopeCpu.cpp - The rotary embedding over a table of angles ----------===//
#include "stdlib/kernels/rope/RopeCpu.h"

#include "stdlib/kernels/cpu/Parallel.h"

#include <cmath>
#include <vector>

namespace mist::kernels {

void ropeCpu(const RopeArgs &a) {
  const Index R = a.rotated(), pairs = R / 2;
  // cos and sin of t * theta^(-i/R) for every position t and even i < R.
  std::vector<float> cosines(size_t(a.seq * pairs)), sines(size_t(a.seq * pairs));
  const float sign = a.inverse ? -1.f : 1.f;
  for (Index t = 0; t < a.seq; ++t)
    for (Index p = 0; p < pairs; ++p) {
      double angle = t * std::pow(double(a.theta), -double(2 * p) / double(R));
      cosines[t * pairs + p] = float(std::cos(angle));
      sines[t * pairs + p] = float(std::sin(angle)) * sign;
    }
  cpu::parallelFor(a.batch * a.seq, 16, [&](Index begin, Index end) {
    for (Index token = begin; token < end; ++token) {
      const Index t = token % a.seq;
      const float *c = cosines.data() + t * pairs, *s = sines.data() + t * pairs;
      for (Index h = 0; h < a.heads; ++h) {
        const Index base = (token * a.heads + h) * a.headDim;
        const float *x = a.inp + base;
        float *out = a.out + base;
        for (Index i = R; i < a.headDim; ++i) // partial rotary: the rest passes through
          out[i] = x[i];
        for (Index p = 0; p < pairs; ++p) {
          float x0 = x[2 * p], x1 = x[2 * p + 1];
          out[2 * p] = x0 * c[p] - x1 * s[p];
          out[2 * p + 1] = x0 * s[p] + x1 * c[p];
        }
      }
    }
  });
}

} // namespace mist::kernels
