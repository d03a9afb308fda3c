//===- ActivationCpu.h - The elementwise ops, fast on CPUs ----------------===//
/// \file
/// The references' contracts (Activation.h), vectorized (tanh, the
/// sigmoid and the normal CDF through cpu::fastExp) and split over the threads.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/activation/Activation.h"

namespace mist::kernels {

void geluFwdCpu(const ElementwiseArgs &x);
void geluBwdCpu(const ElementwiseArgs &x);
void geluExactFwdCpu(const ElementwiseArgs &x);
void geluExactBwdCpu(const ElementwiseArgs &x);
void siluFwdCpu(const ElementwiseArgs &x);
void siluBwdCpu(const ElementwiseArgs &x);
void mulFwdCpu(const ElementwiseArgs &x);
void mulBwdCpu(const ElementwiseArgs &x);
void addFwdCpu(const ElementwiseArgs &x);

} // namespace mist::kernels
