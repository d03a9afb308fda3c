//===- RMSNormCpu.h - RMSNorm, fast on CPUs -------------------------------===//
/// \file
/// The reference's contract (RMSNorm.h) with vectorized fp32 row sums (the
/// reference sums in double), rows split over the threads; the weight
/// gradient is a column sum split by columns, rows in order.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/rmsnorm/RMSNorm.h"

namespace mist::kernels {

void rmsNormFwdCpu(const RMSNormArgs &a);
void rmsNormBwdCpu(const RMSNormArgs &a);

} // namespace mist::kernels
