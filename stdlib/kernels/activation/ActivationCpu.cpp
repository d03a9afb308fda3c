//===- ActivationCpu.cpp - Vectorized elementwise ops ---------------------===//
#include "stdlib/kernels/activation/ActivationCpu.h"

#include "stdlib/kernels/cpu/Parallel.h"
#include "stdlib/kernels/cpu/VectorMath.h"

namespace mist::kernels {

namespace {

constexpr float geluScale = 0.7978845608028654f;      // sqrt(2 / pi)
constexpr float normalPdfScale = 0.3989422804014327f; // 1 / sqrt(2 pi)
// GELU's 0.5 (1 + tanh u) is the sigmoid of 2u, which keeps its relative
// accuracy in the negative tail, where 1 + tanh u cancels (and with it the
// derivative's two terms): the same function, evaluated more accurately.
/// Elements per thread below which splitting costs more than it saves.
constexpr Index grain = 1 << 15;

MIST_CPU_KERNEL void geluFwd(const ElementwiseArgs &x, Index begin, Index end) {
#pragma omp simd
  for (Index i = begin; i < end; ++i) {
    float v = x.a[i];
    x.out[i] = v * cpu::fastSigmoid(2.f * geluScale * (v + 0.044715f * v * v * v));
  }
}

MIST_CPU_KERNEL void geluBwd(const ElementwiseArgs &x, Index begin, Index end) {
#pragma omp simd
  for (Index i = begin; i < end; ++i) {
    float v = x.a[i];
    float sg = cpu::fastSigmoid(2.f * geluScale * (v + 0.044715f * v * v * v));
    float du = geluScale * (1.f + 3.f * 0.044715f * v * v);
    x.da[i] = x.dout[i] * (sg + 2.f * v * sg * (1.f - sg) * du);
  }
}

// The exact GELU, x Phi(x), and its derivative Phi(x) + x phi(x).
MIST_CPU_KERNEL void geluExactFwd(const ElementwiseArgs &x, Index begin, Index end) {
#pragma omp simd
  for (Index i = begin; i < end; ++i)
    x.out[i] = x.a[i] * cpu::fastNormalCdf(x.a[i]);
}

MIST_CPU_KERNEL void geluExactBwd(const ElementwiseArgs &x, Index begin, Index end) {
#pragma omp simd
  for (Index i = begin; i < end; ++i) {
    float v = x.a[i];
    float pdf = normalPdfScale * cpu::fastExp(-0.5f * v * v);
    x.da[i] = x.dout[i] * (cpu::fastNormalCdf(v) + v * pdf);
  }
}

MIST_CPU_KERNEL void siluFwd(const ElementwiseArgs &x, Index begin, Index end) {
#pragma omp simd
  for (Index i = begin; i < end; ++i)
    x.out[i] = x.a[i] * cpu::fastSigmoid(x.a[i]);
}

MIST_CPU_KERNEL void siluBwd(const ElementwiseArgs &x, Index begin, Index end) {
#pragma omp simd
  for (Index i = begin; i < end; ++i) {
    float sg = cpu::fastSigmoid(x.a[i]);
    x.da[i] = x.dout[i] * sg * (1.f + x.a[i] * (1.f - sg));
  }
}

MIST_CPU_KERNEL void mulFwd(const ElementwiseArgs &x, Index begin, Index end) {
#pragma omp simd
  for (Index i = begin; i < end; ++i)
    x.out[i] = x.a[i] * x.b[i];
}

MIST_CPU_KERNEL void mulBwd(const ElementwiseArgs &x, Index begin, Index end) {
#pragma omp simd
  for (Index i = begin; i < end; ++i) {
    float dy = x.dout[i], a = x.a[i], b = x.b[i]; // da may alias a: read first
    x.da[i] = dy * b;
    x.db[i] = dy * a;
  }
}

MIST_CPU_KERNEL void addFwd(const ElementwiseArgs &x, Index begin, Index end) {
#pragma omp simd
  for (Index i = begin; i < end; ++i)
    x.out[i] = x.a[i] + x.b[i];
}

template <class Kernel> void split(const ElementwiseArgs &x, Kernel kernel) {
  cpu::parallelFor(x.n, grain, [&](Index begin, Index end) { kernel(x, begin, end); });
}

} // namespace

void geluFwdCpu(const ElementwiseArgs &x) { split(x, geluFwd); }
void geluBwdCpu(const ElementwiseArgs &x) { split(x, geluBwd); }
void geluExactFwdCpu(const ElementwiseArgs &x) { split(x, geluExactFwd); }
void geluExactBwdCpu(const ElementwiseArgs &x) { split(x, geluExactBwd); }
void siluFwdCpu(const ElementwiseArgs &x) { split(x, siluFwd); }
void siluBwdCpu(const ElementwiseArgs &x) { split(x, siluBwd); }
void mulFwdCpu(const ElementwiseArgs &x) { split(x, mulFwd); }
void mulBwdCpu(const ElementwiseArgs &x) { split(x, mulBwd); }
void addFwdCpu(const ElementwiseArgs &x) { split(x, addFwd); }

} // namespace mist::kernels
