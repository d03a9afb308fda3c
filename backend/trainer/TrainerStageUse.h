//===- TrainerStageUse.h - What one stage of a plan runs ------------------===//
/// \file
/// The facts about a lowered stage the trainer emitter writes tables from:
/// which buffers its regions touch, which are kept from a forward to its
/// backward, its parameters with the gradient buffers that feed them, and
/// what a checkpointed layer recomputes.
//===----------------------------------------------------------------------===//
#pragma once

#include "backend/trainer/Lowering.h"

#include <set>
#include <vector>

namespace mist {

/// What one stage of the plan runs: its regions, the buffers they touch and
/// the parameters they read.
struct StageUse {
  bool pre = false, post = false;
  std::set<int> buffers;
  std::set<int> forward; ///< read or written by a forward op, or a forward input/output
  std::set<int> saved;   ///< of those, read by a backward op: kept from forward to backward
};
StageUse stageUse(const LoweredStage &st, bool first, bool last);

/// A parameter of the stage: its buffer and the gradient buffers that
/// contribute to it (a tied weight gets one from each region reading it).
struct StageParam {
  const ParamLayout *layout;
  int buffer;
  std::vector<int64_t> grads;
};
std::vector<StageParam> stageParams(const LoweredStage &st, const StageUse &use);

/// The kind of a parameter, as weight decay groups them (the train
/// section's no_decay): a linear layer's bias, a norm's weight or bias, an
/// embedding table (token or position, or the LM head's table when it is
/// the tied embedding), or any other weight.
enum class ParamKind { Weight, Bias, Norm, Embedding };
/// From the first forward op of the stage that reads parameter buffer `b`.
ParamKind paramKindOf(const LoweredStage &st, int b);

/// Whether buffer `b` is a parameter of the stage or one of its gradients.
bool isParameterBuffer(const std::vector<StageParam> &params, int b);

/// What a checkpointed layer recomputes before its backward: its saved
/// float activations but its input (kept) and its output (carried on);
/// the same set as StageMemory::recomputed().
std::set<int> recomputedByCheckpoint(const LoweredStage &st, const std::set<int> &layerSaved);

/// What selective recomputation drops after a layer's forward and writes
/// again before its backward: of what a checkpointed layer recomputes, the
/// first results of the ops ir/OpSemantics.h's recomputedSelectively names
/// (norms, activation functions), in forward order of their ops.
std::vector<int> selectivelyRecomputed(const LoweredStage &st, const std::set<int> &recomputed);

/// Whether `region`'s ops read buffer `b`.
bool reads(const LoweredRegion &region, int b);

} // namespace mist
