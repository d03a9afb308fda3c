//===- Rope.h - Rotary position embedding ---------------------------------===//
#pragma once

#include "stdlib/kernels/Tensor.h"

namespace mist::kernels {

/// Rotates each pair (2i, 2i+1) of the first R = rotaryDim dims of every
/// head of x [B, T, H, D] by the angle t * theta^(-2i / R) and copies the
/// other D - R dims (partial rotary, as GPT-NeoX's rotary_pct; R = D when
/// rotaryDim is 0). Backward applies the inverse rotation, so `out`/`inp`
/// may be dinp/dout.
/// T is the storage type: float here; the CUDA kernel also takes bf16.
template <typename T> struct RopeArgsOf {
  T *out;
  const T *inp;
  Index batch, seq, heads, headDim;
  float theta = 10000.f;
  bool inverse = false; ///< backward
  Index rotaryDim = 0;  ///< leading dims of a head that rotate (0: all)
  Index rotated() const { return rotaryDim > 0 ? rotaryDim : headDim; }
};
using RopeArgs = RopeArgsOf<float>;
void ropeRef(const RopeArgs &a);

} // namespace mist::kernels
