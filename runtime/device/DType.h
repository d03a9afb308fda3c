//===- DType.h - The element types of the trainer's tensors ---------------===//
/// \file
/// What a plan's `dtype`, `master_dtype` and `grad_dtype` become in the
/// runtime: fp32 or bf16 storage (f16 plans are refused by the emitter,
/// which says why). bf16 is stored as its 16 bits, the high half of an
/// IEEE fp32: `toBf16` rounds to nearest even (NaN stays a quiet NaN), as
/// `__float2bfloat16_rn` on GPUs and PyTorch's `.to(torch.bfloat16)` do, so
/// CPU ranks and GPUs round every stored value identically.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/HostDevice.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace mist::rt {

enum class DType : uint8_t { F32, BF16 };

inline constexpr size_t bytesOf(DType t) { return t == DType::BF16 ? 2 : 4; }
inline const char *nameOf(DType t) { return t == DType::BF16 ? "bf16" : "f32"; }

/// bf16 bits of x, rounded to nearest even.
MIST_HOST_DEVICE uint16_t toBf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0)
    return uint16_t((bits >> 16) | 0x0040u); // NaN: keep it quiet
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

MIST_HOST_DEVICE float fromBf16(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float x;
  std::memcpy(&x, &bits, 4);
  return x;
}

/// x rounded to the nearest bf16, as a float.
MIST_HOST_DEVICE float roundToBf16(float x) { return fromBf16(toBf16(x)); }

} // namespace mist::rt
