//===- NumpyRandomState.cpp - numpy's legacy RandomState shuffle ----------===//
#include "runtime/data/NumpyRandomState.h"

namespace mist::rt {

uint64_t NumpyRandomState::interval(uint64_t max) {
  if (max == 0)
    return 0;
  uint64_t mask = max;
  for (int shift = 1; shift <= 32; shift *= 2)
    mask |= mask >> shift;
  uint64_t value;
  if (max <= 0xffffffffull) {
    do
      value = uint64_t(engine()) & mask;
    while (value > max);
  } else {
    do {
      const uint64_t high = engine();
      value = (high << 32 | uint64_t(engine())) & mask;
    } while (value > max);
  }
  return value;
}

} // namespace mist::rt
