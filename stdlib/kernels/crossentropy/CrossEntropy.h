//===- CrossEntropy.h - Vocab-parallel cross-entropy ----------------------===//
/// \file
/// Each tp rank holds logits for its vocabulary slice [vocabStart,
/// vocabStart + V). The loss needs three all-reductions over tp, done by the
/// caller between the phases: max of the row maxima, sum of exp(logit -
/// max), and the target's logit (only its owner contributes). With one rank
/// the phases run back to back. The loss is the mean over tokens.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/Tensor.h"

namespace mist::kernels {

/// T is the logits' storage type: float here; the CUDA kernels also take
/// bf16 (CrossEntropyCuda.h). Row statistics are fp32.
template <typename T> struct CrossEntropyArgsOf {
  const T *logits;        ///< [N, V]
  const int32_t *targets; ///< [N]
  float *rowMax;          ///< [N]: phase 1 writes the local max (caller max-reduces)
  float *sumExp;          ///< [N]: phase 2 writes the local sum (caller sum-reduces)
  float *targetLogit;     ///< [N]: phase 2 writes the owner's logit, else 0 (caller sum-reduces)
  T *dlogits;             ///< [N, V], = in backward
  Index rows, vocab, vocabStart;
  Index totalRows;   ///< tokens of the whole micro-batch (the mean's divisor)
  float dloss = 1.f; ///< gradient of the loss
};
using CrossEntropyArgs = CrossEntropyArgsOf<float>;
void crossEntropyMaxRef(const CrossEntropyArgs &a);
void crossEntropySumRef(const CrossEntropyArgs &a);
/// Sum over this rank's rows of (log(sumExp) + max - targetLogit) / totalRows.
double crossEntropyLossRef(const CrossEntropyArgs &a);
void crossEntropyBwdRef(const CrossEntropyArgs &a);

} // namespace mist::kernels
