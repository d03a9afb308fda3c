//===- Attention.h - Causal scaled dot-product attention, GQA/MQA ---------===//
/// \file
/// q is [B, T, H, D], k and v are [B, T, KV, D] with H a multiple of KV
/// (query head h reads key/value head h / (H / KV)); out is [B, T, H, D].
/// A fused qkv input is the three tensors side by side per token: the
/// caller passes strides. Forward saves the log-sum-exp of each query row;
/// backward recomputes the scores, as flash attention does.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/Tensor.h"

namespace mist::kernels {

struct AttentionArgs {
  float *out;             ///< [B, T, H, D]
  float *lse;             ///< [B, H, T]
  const float *q, *k, *v; ///< token strides below
  float *dq, *dk, *dv;    ///< same layouts, = in backward
  const float *dout;      ///< [B, T, H, D]
  Index batch, seq, heads, kvHeads, headDim;
  Index qStride, kvStride; ///< floats between consecutive tokens of q / of k and v
  bool causal = true;
};
void attentionFwdRef(const AttentionArgs &a);
void attentionBwdRef(const AttentionArgs &a);

} // namespace mist::kernels
