//===- LinearCpu.h - The linear layer and LM head, fast on CPUs -----------===//
/// \file
/// The references' contracts (Linear.h) through cpu::gemm: one GEMM per
/// product, the bias gradient as vectorized column sums. Sums are fp32 in
/// the GEMM's order (the LM head's reference sums in double).
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/linear/Linear.h"

namespace mist::kernels {

void linearFwdCpu(const LinearArgs &a);
void linearBwdCpu(const LinearArgs &a);
void lmHeadFwdCpu(float *logits, const float *x, const float *table, Index rows, Index channels,
                  Index vocab);
void lmHeadBwdCpu(float *dx, float *dtable, const float *dlogits, const float *x,
                  const float *table, Index rows, Index channels, Index vocab);

} // namespace mist::kernels
