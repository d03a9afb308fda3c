//===- Embedding.h - Token and position embeddings ------------------------===//
/// \file
/// Token embedding over a vocabulary slice [vocabStart, vocabStart + V) of
/// a vocab-parallel table (ids outside give zeros: the tp all-reduce adds
/// the owner's row); position embedding adds nothing but a table lookup.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/Tensor.h"

namespace mist::kernels {

struct EmbeddingArgs {
  float *out;         ///< [B*T, C]
  const int32_t *ids; ///< [B*T]
  const float *table; ///< [V, C]
  float *dtable;      ///< [V, C], += in backward
  const float *dout;  ///< [B*T, C]
  Index tokens, channels, vocab, vocabStart;
};
void embeddingFwdRef(const EmbeddingArgs &a);
void embeddingBwdRef(const EmbeddingArgs &a);

struct PositionEmbeddingArgs {
  float *out;         ///< [B, T, C]
  const float *table; ///< [T, C]
  float *dtable;      ///< [T, C], += in backward
  const float *dout;  ///< [B, T, C]
  Index batch, seq, channels;
};
void positionEmbeddingFwdRef(const PositionEmbeddingArgs &a);
void positionEmbeddingBwdRef(const PositionEmbeddingArgs &a);

} // namespace mist::kernels
