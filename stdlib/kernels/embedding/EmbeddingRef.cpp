//===- EmbeddingRef.cpp - CPU reference of the embeddings -----------------===//
#include "stdlib/kernels/embedding/Embedding.h"

namespace mist::kernels {

void embeddingFwdRef(const EmbeddingArgs &a) {
  for (Index i = 0; i < a.tokens; ++i) {
    Index row = Index(a.ids[i]) - a.vocabStart;
    bool mine = row >= 0 && row < a.vocab;
    for (Index c = 0; c < a.channels; ++c)
      a.out[i * a.channels + c] = mine ? a.table[row * a.channels + c] : 0.f;
  }
}

void embeddingBwdRef(const EmbeddingArgs &a) {
  for (Index i = 0; i < a.tokens; ++i) {
    Index row = Index(a.ids[i]) - a.vocabStart;
    if (row < 0 || row >= a.vocab)
      continue;
    for (Index c = 0; c < a.channels; ++c)
      a.dtable[row * a.channels + c] += a.dout[i * a.channels + c];
  }
}

void positionEmbeddingFwdRef(const PositionEmbeddingArgs &a) {
  for (Index i = 0; i < a.tokens; ++i) {
    const Index t = (a.firstToken + i) % a.seq;
    for (Index c = 0; c < a.channels; ++c)
      a.out[i * a.channels + c] = a.table[t * a.channels + c];
  }
}

void positionEmbeddingBwdRef(const PositionEmbeddingArgs &a) {
  for (Index i = 0; i < a.tokens; ++i) {
    const Index t = (a.firstToken + i) % a.seq;
    for (Index c = 0; c < a.channels; ++c)
      a.dtable[t * a.channels + c] += a.dout[i * a.channels + c];
  }
}

} // namespace mist::kernels
