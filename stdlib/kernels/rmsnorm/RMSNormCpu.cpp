//===- RMSNormCpu.cpp - RMSNorm with vectorized rows ----------------------===//
#include "stdlib/kernels/rmsnorm/RMSNormCpu.h"

#include "stdlib/kernels/cpu/Parallel.h"
#include "stdlib/kernels/cpu/VectorMath.h"

#include <cmath>

namespace mist::kernels {

namespace {

MIST_CPU_KERNEL void forwardRows(const RMSNormArgs &a, Index begin, Index end) {
  const Index C = a.channels;
  for (Index n = begin; n < end; ++n) {
    const float *x = a.inp + n * C;
    float squares = 0.f;
#pragma omp simd reduction(+ : squares)
    for (Index c = 0; c < C; ++c)
      squares += x[c] * x[c];
    float rstd = 1.f / std::sqrt(squares / float(C) + a.eps);
    a.rstd[n] = rstd;
    float *out = a.out + n * C;
#pragma omp simd
    for (Index c = 0; c < C; ++c)
      out[c] = x[c] * rstd * a.weight[c];
  }
}

/// dx = rstd * g - x * rstd^3 * mean(g * x) with g = dy * w.
MIST_CPU_KERNEL void inputGradRows(const RMSNormArgs &a, Index begin, Index end) {
  const Index C = a.channels;
  for (Index n = begin; n < end; ++n) {
    const float *x = a.inp + n * C, *dy = a.dout + n * C;
    const float rstd = a.rstd[n];
    float gx = 0.f;
#pragma omp simd reduction(+ : gx)
    for (Index c = 0; c < C; ++c)
      gx += dy[c] * a.weight[c] * x[c];
    const float correction = rstd * rstd * rstd * (gx / float(C));
    float *dx = a.dinp + n * C;
#pragma omp simd
    for (Index c = 0; c < C; ++c)
      dx[c] = rstd * dy[c] * a.weight[c] - x[c] * correction;
  }
}

MIST_CPU_KERNEL void weightGradColumns(const RMSNormArgs &a, Index begin, Index end) {
  const Index C = a.channels;
  for (Index n = 0; n < a.rows; ++n) {
    const float *x = a.inp + n * C, *dy = a.dout + n * C;
    const float rstd = a.rstd[n];
#pragma omp simd
    for (Index c = begin; c < end; ++c)
      a.dweight[c] += dy[c] * x[c] * rstd;
  }
}

} // namespace

void rmsNormFwdCpu(const RMSNormArgs &a) {
  cpu::parallelFor(a.rows, 16, [&](Index begin, Index end) { forwardRows(a, begin, end); });
}

void rmsNormBwdCpu(const RMSNormArgs &a) {
  if (a.dinp)
    cpu::parallelFor(a.rows, 16, [&](Index begin, Index end) { inputGradRows(a, begin, end); });
  cpu::parallelFor(a.channels, 64,
                   [&](Index begin, Index end) { weightGradColumns(a, begin, end); });
}

} // namespace mist::kernels
