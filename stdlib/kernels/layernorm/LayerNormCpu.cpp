//===- LayerNormCpu.cpp - LayerNorm with vectorized rows ------------------===//
#include "stdlib/kernels/layernorm/LayerNormCpu.h"

#include "stdlib/kernels/cpu/Parallel.h"
#include "stdlib/kernels/cpu/VectorMath.h"

#include <cmath>

namespace mist::kernels {

namespace {

MIST_CPU_KERNEL void forwardRows(const LayerNormArgs &a, Index begin, Index end) {
  const Index C = a.channels;
  for (Index n = begin; n < end; ++n) {
    const float *x = a.inp + n * C;
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (Index c = 0; c < C; ++c)
      sum += x[c];
    float mean = sum / float(C), squares = 0.f;
#pragma omp simd reduction(+ : squares)
    for (Index c = 0; c < C; ++c)
      squares += (x[c] - mean) * (x[c] - mean);
    float rstd = 1.f / std::sqrt(squares / float(C) + a.eps);
    a.mean[n] = mean;
    a.rstd[n] = rstd;
    float *out = a.out + n * C;
    if (a.bias)
#pragma omp simd
      for (Index c = 0; c < C; ++c)
        out[c] = (x[c] - mean) * rstd * a.weight[c] + a.bias[c];
    else
#pragma omp simd
      for (Index c = 0; c < C; ++c)
        out[c] = (x[c] - mean) * rstd * a.weight[c];
  }
}

/// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w.
MIST_CPU_KERNEL void inputGradRows(const LayerNormArgs &a, Index begin, Index end) {
  const Index C = a.channels;
  for (Index n = begin; n < end; ++n) {
    const float *x = a.inp + n * C, *dy = a.dout + n * C;
    const float mean = a.mean[n], rstd = a.rstd[n];
    float gSum = 0.f, gxSum = 0.f;
#pragma omp simd reduction(+ : gSum, gxSum)
    for (Index c = 0; c < C; ++c) {
      float g = dy[c] * a.weight[c];
      gSum += g;
      gxSum += g * (x[c] - mean) * rstd;
    }
    const float gMean = gSum / float(C), gxMean = gxSum / float(C);
    float *dx = a.dinp + n * C;
#pragma omp simd
    for (Index c = 0; c < C; ++c) {
      float xhat = (x[c] - mean) * rstd;
      dx[c] = rstd * (dy[c] * a.weight[c] - gMean - xhat * gxMean);
    }
  }
}

/// dweight += Σ_n dy * xhat and dbias += Σ_n dy over the columns [begin, end).
MIST_CPU_KERNEL void parameterGradColumns(const LayerNormArgs &a, Index begin, Index end) {
  const Index C = a.channels;
  for (Index n = 0; n < a.rows; ++n) {
    const float *x = a.inp + n * C, *dy = a.dout + n * C;
    const float mean = a.mean[n], rstd = a.rstd[n];
#pragma omp simd
    for (Index c = begin; c < end; ++c)
      a.dweight[c] += dy[c] * ((x[c] - mean) * rstd);
    if (a.dbias)
#pragma omp simd
      for (Index c = begin; c < end; ++c)
        a.dbias[c] += dy[c];
  }
}

} // namespace

void layerNormFwdCpu(const LayerNormArgs &a) {
  cpu::parallelFor(a.rows, 16, [&](Index begin, Index end) { forwardRows(a, begin, end); });
}

void layerNormBwdCpu(const LayerNormArgs &a) {
  if (a.dinp)
    cpu::parallelFor(a.rows, 16, [&](Index begin, Index end) { inputGradRows(a, begin, end); });
  cpu::parallelFor(a.channels, 64,
                   [&](Index begin, Index end) { parameterGradColumns(a, begin, end); });
}

} // namespace mist::kernels
