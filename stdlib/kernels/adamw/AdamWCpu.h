//===- AdamWCpu.h - AdamW, fast on CPUs -----------------------------------===//
/// \file
/// The reference's contract (AdamW.h), vectorized and split over the
/// threads; the bias corrections are applied as fp32 factors.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/adamw/AdamW.h"

namespace mist::kernels {

void adamWCpu(const AdamWArgs &a);

} // namespace mist::kernels
