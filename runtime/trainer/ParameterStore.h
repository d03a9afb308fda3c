//===- ParameterStore.h - One stage's parameters and optimizer state ------===//
/// \file
/// Everything a rank keeps of its stage's parameters (ParameterTable): the
/// weights (in the region frames, where the generated code reads them), the
/// fp32 master copies and Adam moments, and the gradient sums of the step,
/// laid out as the plan's ZeRO level and offload ratios say:
/// - ZeRO-1 (`zeroOptimizer`, dp > 1): masters and moments of one flat slice
///   of every tensor per dp rank (the last slice padded); gradients are
///   reduce-scattered, the updated weights all-gathered;
/// - ZeRO-2 (`zeroGrads`): the gradient sums are sliced too: every
///   micro-batch's gradients are reduce-scattered into the slice at once;
/// - ZeRO-3 (`zeroWeights`): only the weight slice is kept; a region's
///   weights are all-gathered just before it runs (forward, recompute,
///   backward) and dropped after;
/// - offload: the tail fraction of weights (or of the ZeRO-3 slice),
///   gradient sums and optimizer state lives in host memory between uses
///   (OffloadEngine); the optimizer steps the device part of its state in
///   place and the host tail in a staging buffer of one layer's size.
/// Weights have the plan's dtype (bf16: rounded from the fp32 masters by
/// every AdamW step), gradient buffers and sums its grad_dtype, masters and
/// moments fp32. Without ZeRO and offload, nothing is kept twice: an fp32
/// plan's master weights are its weights (AdamW updates them in place), and a
/// parameter with one gradient buffer sums the step's micro-batches there
/// (the ops accumulate) instead of in a separate gradient sum.
/// Gathers and reductions run on the g2g stream, offload copies on h2d and
/// d2h, the optimizer on compute (runtime/trainer/Streams.h).
/// A weight tied across the first and last stage (the embedding) has its
/// gradient summed over both stages' ranks before the step, so both copies
/// take the same update.
///
/// The work is in rooms, along what the stage schedule's steps need:
/// `weights` (their moves: fetch, gather, acquire, release), `gradients`
/// (buffers, sums and their reduction), `optimizer` (the deferred AdamW
/// update and its offloaded state) and `values` (initial values,
/// checkpoints).
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/trainer/GradientSums.h"
#include "runtime/trainer/OptimizerUpdate.h"
#include "runtime/trainer/ParameterTable.h"
#include "runtime/trainer/ParameterValues.h"
#include "runtime/trainer/WeightMoves.h"

namespace mist::rt {

class ParameterStore {
public:
  ParameterStore(const StageSpec &stage, Frame &global, std::vector<Frame> &layers,
                 StageGroups groups, OffloadEngine &offload, Streams &streams)
      : table(stage, global, layers, groups, offload, streams), values(table), weights(table),
        gradients(table), optimizer(table, gradients) {}
  ParameterStore(const ParameterStore &) = delete;
  ParameterStore &operator=(const ParameterStore &) = delete;

  /// After initialize or load: the weights where the plan keeps them
  /// between uses, the optimizer's staging reserved.
  void settle() {
    values.settle();
    optimizer.reserveStaging();
  }

private:
  ParameterTable table; ///< first: the rooms below see it

public:
  ParameterValues values;
  WeightMoves weights;
  GradientSums gradients;
  OptimizerUpdate optimizer;
};

} // namespace mist::rt
