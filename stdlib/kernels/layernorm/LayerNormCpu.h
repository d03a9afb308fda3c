//===- LayerNormCpu.h - LayerNorm, fast on CPUs ---------------------------===//
/// \file
/// The reference's contract (LayerNorm.h) with vectorized fp32 row sums
/// (the reference sums in double), rows split over the threads; the weight
/// and bias gradients are column sums split by columns, rows in order.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/layernorm/LayerNorm.h"

namespace mist::kernels {

void layerNormFwdCpu(const LayerNormArgs &a);
void layerNormBwdCpu(const LayerNormArgs &a);

} // namespace mist::kernels
