//===- InitialValuesMath.h - One parameter element's initial value --------===//
/// \file
/// Initial parameter values are pure functions of (tensor, element index in
/// the full tensor), so every plan, and every rank holding any part of a
/// tensor, starts from the same model. This is that function, for the host
/// (the CPU trainer, runtime/trainer/Initialization.cpp) and the device (the
/// GPU trainer draws its values where they live: InitialValues.cu), one
/// definition (HostDevice.h). A device's double log and cos may differ from
/// glibc's in the last bit of a double, which moves the float result by an
/// ulp for about one element in 2^28: GPU and CPU runs of one model agree to
/// that.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/HostDevice.h"
#include "stdlib/kernels/Tensor.h"

#include <cmath>
#include <cstdint>

namespace mist::kernels {

/// Parts a tensor's split axis may hold (fused q/k/v: 3; a weight sliced
/// per head: one per head).
constexpr int initialValuesMaxGroups = 256;

/// One tensor's values as one tp rank holds them.
struct InitialValuesArgs {
  float *out;
  Index n; ///< local elements
  /// A constant tensor (biases 0, norm weights 1) or a random stream's key.
  bool constant;
  float value;
  uint64_t key;
  /// The tp shard: local element i is full element fullIndex(i). With tp 1
  /// or no split axis, the identity. The split axis has fullAxis entries in
  /// groupCount parts (group[g] entries each), each part split evenly over
  /// tp ranks; inner is the product of the dimensions after the axis.
  int tp, rank, groupCount;
  Index inner, fullAxis, group[initialValuesMaxGroups];
};

namespace math {

/// SplitMix64's finalizer: a well-mixed 64-bit value from a counter.
MIST_HOST_DEVICE uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// The full tensor's index of local element `local` of rank a.rank's shard.
MIST_HOST_DEVICE Index fullIndex(const InitialValuesArgs &a, Index local) {
  if (a.tp == 1 || a.groupCount == 0)
    return local;
  const Index localAxis = a.fullAxis / a.tp;
  const Index innerIdx = local % a.inner, axisIdx = (local / a.inner) % localAxis,
              outer = local / (a.inner * localAxis);
  // Walk the parts: each contributes group/tp consecutive local entries.
  Index offset = 0, seen = 0, fullAxisIdx = 0;
  for (int g = 0; g < a.groupCount; ++g) {
    const Index part = a.group[g] / a.tp;
    if (axisIdx < seen + part) {
      fullAxisIdx = offset + a.rank * part + (axisIdx - seen);
      break;
    }
    seen += part;
    offset += a.group[g];
  }
  return (outer * a.fullAxis + fullAxisIdx) * a.inner + innerIdx;
}

/// Element `index` of the full tensor: 0.02 N(0, 1) by Box-Muller from two
/// hashes of (key, index), or the constant.
MIST_HOST_DEVICE float initialValue(bool constant, float value, uint64_t key, Index index) {
  if (constant)
    return value;
  const uint64_t k = key ^ uint64_t(index);
  const uint64_t a = splitmix64(k), b = splitmix64(k ^ 0x5bd1e995ull);
  const double u1 = (double(a >> 11) + 0.5) / 9007199254740992.0,
               u2 = double(b >> 11) / 9007199254740992.0;
  return float(0.02 * sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
}

/// Local element i of the shard a describes.
MIST_HOST_DEVICE float initialValueAt(const InitialValuesArgs &a, Index i) {
  return initialValue(a.constant, a.value, a.key, fullIndex(a, i));
}

} // namespace math

} // namespace mist::kernels
