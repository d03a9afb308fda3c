//===- Hash.h - The counter-based hashes behind initial values and data ---===//
/// \file
/// Initial parameter values and synthetic data are pure functions of their
/// indices (so every plan, and every rank holding any part, agrees); these
/// are the hashes they are drawn from.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>

namespace mist::rt {

/// SplitMix64's finalizer: a well-mixed 64-bit value from a counter.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// FNV-1a of a name.
inline uint64_t fnv1a(const std::string &s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s)
    h = (h ^ c) * 0x100000001b3ull;
  return h;
}

} // namespace mist::rt
