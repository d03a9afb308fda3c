//===- TpContext.h - What the generated code needs of its tp group --------===//
/// \file
/// The generated region functions call the runtime's ops directly; the few
/// ops that need the tensor-parallel group (all-reduce of partial sums, the
/// vocabulary-parallel loss, the rank's vocabulary slice) go through this
/// context, so train.cu holds no communicator of its own.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/comm/Communicator.h"
#include <cstdint>

namespace mist::rt {

class TpContext {
public:
  explicit TpContext(Communicator *tp) : tp(tp) {}
  int rank() const { return tp ? tp->rank() : 0; }
  int size() const { return tp ? tp->size() : 1; }
  /// out = the sum over the group of `in` (n floats).
  void allReduce(float *out, const float *in, int64_t n);
  /// The mean token loss over a vocabulary split over the group (this rank
  /// holds `vocab` columns starting at rank() * vocab); stats[rows, 2] gets
  /// the row max and log-sum-exp over the whole vocabulary.
  float crossEntropy(float *stats, const float *logits, const int32_t *targets, int64_t rows,
                     int64_t vocab);
  /// The gradient of that loss for this rank's columns.
  void crossEntropyGrad(float *dlogits, float dloss, const float *logits, const int32_t *targets,
                        const float *stats, int64_t rows, int64_t vocab);

private:
  Communicator *tp; ///< null: one rank
};

} // namespace mist::rt
