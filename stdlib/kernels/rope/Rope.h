//===- Rope.h - Rotary position embedding ---------------------------------===//
#pragma once

#include "stdlib/kernels/Tensor.h"

namespace mist::kernels {

/// Rotates each pair (2i, 2i+1) of every head of x [B, T, H, D] by the
/// angle t * theta^(-2i / D). Backward applies the inverse rotation, so
/// `out`/`inp` may be dinp/dout.
struct RopeArgs {
  float *out;
  const float *inp;
  Index batch, seq, heads, headDim;
  float theta = 10000.f;
  bool inverse = false; ///< backward
};
void ropeRef(const RopeArgs &a);

} // namespace mist::kernels
