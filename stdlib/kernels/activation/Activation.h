//===- Activation.h - Elementwise GELU, SiLU, product and sum -------------===//
#pragma once

#include "stdlib/kernels/Tensor.h"

namespace mist::kernels {

/// One struct for the elementwise ops: `a` (and `b` for the binary ones) in,
/// `out` out; backward reads `dout` and writes `da` (and `db`).
/// T is the storage type: float here; the CUDA kernels also take bf16
/// (ActivationCuda.h).
template <typename T> struct ElementwiseArgsOf {
  T *out;
  const T *a, *b;
  T *da, *db;
  const T *dout;
  Index n;
};
using ElementwiseArgs = ElementwiseArgsOf<float>;
void geluFwdRef(const ElementwiseArgs &x); ///< tanh approximation, as GPT-2/3
void geluBwdRef(const ElementwiseArgs &x);
void geluExactFwdRef(const ElementwiseArgs &x); ///< x Phi(x), as Megatron-LM, GPT-NeoX, Falcon
void geluExactBwdRef(const ElementwiseArgs &x);
void siluFwdRef(const ElementwiseArgs &x);
void siluBwdRef(const ElementwiseArgs &x);
void mulFwdRef(const ElementwiseArgs &x);
void mulBwdRef(const ElementwiseArgs &x);
void addFwdRef(const ElementwiseArgs &x); ///< residual add; its backward is the identity

} // namespace mist::kernels
