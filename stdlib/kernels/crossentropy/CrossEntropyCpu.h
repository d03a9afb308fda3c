//===- CrossEntropyCpu.h - The cross-entropy phases, fast on CPUs ---------===//
/// \file
/// The references' contracts (CrossEntropy.h), rows split over the threads,
/// exponentials through cpu::fastExp and row sums in fp32 (the reference
/// sums in double). The loss itself stays the reference's double sum.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/crossentropy/CrossEntropy.h"

namespace mist::kernels {

void crossEntropyMaxCpu(const CrossEntropyArgs &a);
void crossEntropySumCpu(const CrossEntropyArgs &a);
void crossEntropyBwdCpu(const CrossEntropyArgs &a);

} // namespace mist::kernels
