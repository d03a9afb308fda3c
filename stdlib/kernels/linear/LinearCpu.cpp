//===- LinearCpu.cpp - The linear layer and LM head over cpu::gemm --------===//
#include "stdlib/kernels/linear/LinearCpu.h"

#include "stdlib/kernels/cpu/Gemm.h"
#include "stdlib/kernels/cpu/Parallel.h"
#include "stdlib/kernels/cpu/VectorMath.h"

#include <algorithm>

namespace mist::kernels {

using cpu::gemm;
using cpu::Trans;

namespace {

/// sums[c] += Σ_n x[n, c] for the columns [begin, end), rows in order.
MIST_CPU_KERNEL void addColumnSums(float *sums, const float *x, Index rows, Index columns,
                                   Index begin, Index end) {
  for (Index n = 0; n < rows; ++n) {
    const float *row = x + n * columns;
#pragma omp simd
    for (Index c = begin; c < end; ++c)
      sums[c] += row[c];
  }
}

} // namespace

void linearFwdCpu(const LinearArgs &a) {
  float beta = 0.f;
  if (a.bias) { // the GEMM adds onto the broadcast bias, as the reference starts from it
    for (Index n = 0; n < a.rows; ++n)
      std::copy(a.bias, a.bias + a.outFeatures, a.out + n * a.outFeatures);
    beta = 1.f;
  }
  gemm(Trans::No, Trans::No, a.rows, a.outFeatures, a.in, 1.f, a.inp, a.in, a.weight, a.outFeatures,
       beta, a.out, a.outFeatures);
}

void linearBwdCpu(const LinearArgs &a) {
  if (a.dinp) // dx = dout W^T
    gemm(Trans::No, Trans::Yes, a.rows, a.in, a.outFeatures, 1.f, a.dout, a.outFeatures, a.weight,
         a.outFeatures, 0.f, a.dinp, a.in);
  // dW += x^T dout
  gemm(Trans::Yes, Trans::No, a.in, a.outFeatures, a.rows, 1.f, a.inp, a.in, a.dout, a.outFeatures,
       1.f, a.dweight, a.outFeatures);
  if (a.dbias)
    cpu::parallelFor(a.outFeatures, 256, [&](Index begin, Index end) {
      addColumnSums(a.dbias, a.dout, a.rows, a.outFeatures, begin, end);
    });
}

void lmHeadFwdCpu(float *logits, const float *x, const float *table, Index rows, Index channels,
                  Index vocab) {
  gemm(Trans::No, Trans::Yes, rows, vocab, channels, 1.f, x, channels, table, channels, 0.f, logits,
       vocab);
}

void lmHeadBwdCpu(float *dx, float *dtable, const float *dlogits, const float *x,
                  const float *table, Index rows, Index channels, Index vocab) {
  gemm(Trans::No, Trans::No, rows, channels, vocab, 1.f, dlogits, vocab, table, channels, 0.f, dx,
       channels);
  gemm(Trans::Yes, Trans::No, vocab, channels, rows, 1.f, dlogits, vocab, x, channels, 1.f, dtable,
       channels);
}

} // namespace mist::kernels
