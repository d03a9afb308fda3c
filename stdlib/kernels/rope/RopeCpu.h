//===- RopeCpu.h - The rotary embedding, fast on CPUs ---------------------===//
/// \file
/// The reference's contract (Rope.h) with the angles' cosines and sines
/// computed once per (position, pair) rather than per element, by the
/// reference's formula, so the results are the reference's bit for bit.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/rope/Rope.h"

namespace mist::kernels {

void ropeCpu(const RopeArgs &a);

} // namespace mist::kernels
