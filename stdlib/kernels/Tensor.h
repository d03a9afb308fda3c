//===- Tensor.h - What every kernel argument struct shares ----------------===//
#pragma once

#include <cstdint>

namespace mist::kernels {

/// Sizes are 64-bit: B*T*V overflows 32 bits for real models.
using Index = int64_t;

} // namespace mist::kernels
