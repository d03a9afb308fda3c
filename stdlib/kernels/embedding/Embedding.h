//===- Embedding.h - Token and position embeddings ------------------------===//
/// \file
/// Token embedding over a vocabulary slice [vocabStart, vocabStart + V) of
/// a vocab-parallel table (ids outside give zeros: the tp all-reduce adds
/// the owner's row); position embedding adds nothing but a table lookup.
/// Position embedding runs over a run of `tokens` consecutive rows of the
/// flattened [B*T] token axis starting at row `firstToken` (row r is at
/// position r mod T): all of them, or under sequence parallelism the tp
/// rank's part.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/Tensor.h"

namespace mist::kernels {

/// T is the storage type of the activations and the table: float here; the
/// CUDA kernels also take bf16 (EmbeddingCuda.h). Table gradients are fp32.
template <typename T> struct EmbeddingArgsOf {
  T *out;             ///< [B*T, C]
  const int32_t *ids; ///< [B*T]
  const T *table;     ///< [V, C]
  float *dtable;      ///< [V, C], += in backward
  const T *dout;      ///< [B*T, C]
  Index tokens, channels, vocab, vocabStart;
};
using EmbeddingArgs = EmbeddingArgsOf<float>;
void embeddingFwdRef(const EmbeddingArgs &a);
void embeddingBwdRef(const EmbeddingArgs &a);

template <typename T> struct PositionEmbeddingArgsOf {
  T *out;         ///< [tokens, C]
  const T *table; ///< [T, C]
  float *dtable;  ///< [T, C], += in backward
  const T *dout;  ///< [tokens, C]
  Index tokens, seq, channels;
  Index firstToken; ///< the flattened row of out's first row
};
using PositionEmbeddingArgs = PositionEmbeddingArgsOf<float>;
void positionEmbeddingFwdRef(const PositionEmbeddingArgs &a);
void positionEmbeddingBwdRef(const PositionEmbeddingArgs &a);

} // namespace mist::kernels
