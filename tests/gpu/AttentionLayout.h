//===- AttentionLayout.h - The attention tests' configurations -----------===//
/// \file
/// What AttentionKernelsTest and AttentionCudnnTest share: a configuration
/// (sizes, fused qkv or not, causal), its name, and where q, k and v lie.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/Tensor.h"

#include <cstdio>
#include <string>

namespace mist::gputest {

using mist::kernels::Index;

struct Config {
  Index batch, seq, heads, kvHeads, headDim;
  bool fused, causal;
};

inline std::string name(const Config &c) {
  char text[160];
  std::snprintf(text, sizeof text, "B%lld T%lld H%lld KV%lld D%lld %s%s", (long long)c.batch,
                (long long)c.seq, (long long)c.heads, (long long)c.kvHeads, (long long)c.headDim,
                c.fused ? "fused" : "separate", c.causal ? " causal" : "");
  return text;
}

/// The q, k, v tensors (or one fused qkv buffer) and where each starts.
struct Layout {
  Index qStride, kvStride, qOffset, kOffset, vOffset;
  size_t qSize, kvSize; ///< of the separate buffers; the fused one is qSize
};

inline Layout layoutOf(const Config &c) {
  Index tokens = c.batch * c.seq, D = c.headDim;
  if (c.fused) {
    Index stride = (c.heads + 2 * c.kvHeads) * D;
    return {stride, stride, 0, c.heads * D, (c.heads + c.kvHeads) * D, size_t(tokens * stride), 0};
  }
  return {c.heads * D,
          c.kvHeads * D,
          0,
          0,
          0,
          size_t(tokens * c.heads * D),
          size_t(tokens * c.kvHeads * D)};
}

} // namespace mist::gputest
