//===- Hash.h - The counter-based hashes behind initial values and data ---===//
/// \file
/// Initial parameter values and synthetic data are pure functions of their
/// indices (so every plan, and every rank holding any part, agrees); these
/// are the hashes they are drawn from.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/checkpoint/TensorHash.h" // fnv1a
#include "stdlib/kernels/init/InitialValuesMath.h"

#include <cstdint>
#include <string>

namespace mist::rt {

/// SplitMix64's finalizer, shared with the kernels that draw initial
/// values on a GPU.
using kernels::math::splitmix64;

} // namespace mist::rt
