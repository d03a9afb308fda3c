//===- TpContext.h - What the generated code needs of its tp group --------===//
/// \file
/// The generated region functions call the runtime's ops directly; the few
/// ops that need the tensor-parallel group (all-reduce of partial sums,
/// sequence parallelism's all-gather and reduce-scatter, the
/// vocabulary-parallel loss, the rank's vocabulary slice) go through this
/// context, so train.cu holds no communicator of its own.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/comm/Communicator.h"
#include "runtime/device/DeviceArray.h"
#include <cstdint>

namespace mist::rt {

class TpContext {
public:
  explicit TpContext(Communicator *tp) : tp(tp) {}
  int rank() const { return tp ? tp->rank() : 0; }
  int size() const { return tp ? tp->size() : 1; }
  /// out = the sum over the group of `in` (n elements of one type).
  void allReduce(Tensor out, ConstTensor in, int64_t n);
  /// Sequence parallelism: out[size() * n] = every rank's n elements of `in`
  /// in rank order (its part of the flattened tokens, whole again).
  void allGather(Tensor out, ConstTensor in, int64_t n);
  /// out[n] = this rank's part of the sum over the group of in[size() * n].
  void reduceScatter(Tensor out, ConstTensor in, int64_t n);
  /// *loss (a device scalar) = the mean token loss of `rows` rows; stats[rows,
  /// 2] gets the row max and log-sum-exp. With `vocabParallel` the vocabulary
  /// is split over the group (this rank holds `vocab` columns starting at
  /// rank() * vocab) and the phases are combined over it; otherwise this
  /// rank holds the whole vocabulary.
  void crossEntropy(Tensor loss, Tensor stats, ConstTensor logits, const int32_t *targets,
                    int64_t rows, int64_t vocab, bool vocabParallel);
  /// The gradient of that loss for this rank's columns; `dloss` is a device scalar.
  void crossEntropyGrad(Tensor dlogits, ConstTensor dloss, ConstTensor logits,
                        const int32_t *targets, ConstTensor stats, int64_t rows, int64_t vocab,
                        bool vocabParallel);

private:
  Communicator *tp; ///< null: one rank
  /// The loss phases' per-row values, kept for the next micro-batch.
  DeviceArray<float> rowMax, sumExp, targetLogit, gathered;
};

} // namespace mist::rt
