//===- NumpyRandomState.h - numpy's legacy RandomState shuffle ------------===//
/// \file
/// Megatron-LM orders its GPT samples with `numpy.random.RandomState(seed)`
/// and its `shuffle`, so reading a Megatron dataset in Megatron's order
/// needs exactly those draws. RandomState is MT19937 seeded with the
/// reference init_genrand (what std::mt19937's seeding is too), and its
/// shuffle is Fisher-Yates from the last element down, each position i
/// swapped with a draw from [0, i] made by masking 32-bit outputs (64-bit
/// ones, high word first, above 2^32 - 1) to the smallest covering power of
/// two and rejecting values above i (numpy's `random_interval`).
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace mist::rt {

class NumpyRandomState {
public:
  /// numpy.random.RandomState(seed) for a seed in [0, 2^32).
  explicit NumpyRandomState(uint32_t seed) : engine(seed) {}

  /// A uniform draw from [0, max], numpy's random_interval.
  uint64_t interval(uint64_t max);

  /// RandomState.shuffle of a one-dimensional array, in place.
  template <typename T> void shuffle(std::vector<T> &values) {
    for (size_t i = values.size(); i-- > 1;)
      std::swap(values[i], values[size_t(interval(i))]);
  }

private:
  std::mt19937 engine;
};

} // namespace mist::rt
