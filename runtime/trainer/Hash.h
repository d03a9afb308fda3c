//===- Hash.h - The counter-based hashes behind initial values and data ---===//
/// \file
/// Initial parameter values and synthetic data are pure functions of their
/// indices (so every plan, and every rank holding any part, agrees); these
/// are the hashes they are drawn from.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/init/InitialValuesMath.h"

#include <cstdint>
#include <string>

namespace mist::rt {

/// SplitMix64's finalizer, shared with the kernels that draw initial
/// values on a GPU.
using kernels::math::splitmix64;

/// FNV-1a of a name.
inline uint64_t fnv1a(const std::string &s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s)
    h = (h ^ c) * 0x100000001b3ull;
  return h;
}

} // namespace mist::rt
