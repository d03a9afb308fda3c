//===- RopeMath.h - The rotary embedding's angle and rotation, GPU and CPU ===//
/// \file
/// What the CUDA RoPE kernel (Rope.cu) computes per (position, pair): the
/// angle t * theta^(-i/R) in double, as the reference (RopeRef.cpp) does (in
/// fp32 it loses about 1e-4 radian at t ~ 4096), and the pair rotated by its
/// fp32 cosine and sine. One definition for the device and the host
/// (HostDevice.h), so that a CPU test checks the GPU's formulas.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/HostDevice.h"
#include "stdlib/kernels/Tensor.h"

#include <math.h>

namespace mist::kernels::math {

/// The angle of the pair starting at (even) dim i of R rotated dims, at position t.
MIST_HOST_DEVICE double ropeAngle(Index t, Index i, Index rotated, float theta) {
  return double(t) * pow(double(theta), -double(i) / double(rotated));
}

/// (x0, x1) rotated by the angle whose cosine and sine are c and s.
MIST_HOST_DEVICE void ropeRotate(float x0, float x1, float c, float s, float &y0, float &y1) {
  y0 = x0 * c - x1 * s;
  y1 = x0 * s + x1 * c;
}

} // namespace mist::kernels::math
