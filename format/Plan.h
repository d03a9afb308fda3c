//===- Plan.h - A training plan: the tuner's output, the backend's input --===//
/// \file
/// The plan format of DESIGN.md section 9 (schema in docs/plan.md). A plan
/// may come from the tuner or be written by hand; yaml/PlanLoader reads
/// it with located errors, yaml/PlanWriter writes it.
//===----------------------------------------------------------------------===//
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mist {

/// The plan-file version yaml/PlanLoader reads (`mist_plan: 1`).
constexpr int planFormatVersion = 1;

/// What a stage shards over its dp ranks. The flags nest as ZeRO's levels
/// do (DeepSpeed's stages, FSDP's sharding strategies): level 1 shards the
/// optimizer state, 2 the gradients too, 3 the weights too. The plan loader
/// refuses any other combination, so the model, the tuner, the schedule and
/// the trainer read the same three levels.
struct ZeroFlags {
  bool weights = false, grads = false, optimizer = false;
  bool operator==(const ZeroFlags &) const = default;
  /// 0 (nothing sharded) to 3; meaningful when nested().
  int level() const { return weights ? 3 : grads ? 2 : optimizer ? 1 : 0; }
  /// Whether the flags are one of ZeRO's levels.
  bool nested() const { return (!weights || grads) && (!grads || optimizer); }
  static ZeroFlags ofLevel(int level) { return {level >= 3, level >= 2, level >= 1}; }
  /// For people: "ZeRO-0" to "ZeRO-3" for the levels, else what is sharded
  /// ("optimizer+weights"). Headers, reports and summaries all say it so.
  std::string name() const {
    if (nested())
      return "ZeRO-" + std::to_string(level());
    std::string s;
    for (auto [on, what] : {std::pair{optimizer, "optimizer"}, std::pair{grads, "grads"},
                            std::pair{weights, "weights"}})
      if (on)
        s += (s.empty() ? "" : "+") + std::string(what);
    return s;
  }
};

struct OffloadRatios {
  double weights = 0, grads = 0, optimizer = 0, activations = 0; ///< each in [0, 1]
  bool operator==(const OffloadRatios &) const = default;
};

struct StagePlan {
  int firstLayer = 0, lastLayer = 0; ///< inclusive; stage 0 also runs pre, the last post
  int meshNodes = 1, meshGpusPerNode = 1;
  int microBatch = 1;
  int dp = 1, tp = 1;
  ZeroFlags zero;
  int ckptLayers = 0; ///< the last ckptLayers layers of the stage are recomputed
  OffloadRatios offload;

  int layers() const { return lastLayer - firstLayer + 1; }
  int gpus() const { return meshNodes * meshGpusPerNode; }
  bool operator==(const StagePlan &) const = default;
};

struct PlanPrediction {
  double iterationSeconds = 0;
  double tokensPerSecond = 0;
  std::vector<double> peakGiB;
  bool operator==(const PlanPrediction &) const = default;
};

struct Plan {
  int version = planFormatVersion;
  std::string model;
  /// What the model trained with when the plan was tuned (absent in plans
  /// written by hand or before they were recorded): a plan used with another
  /// sequence length or precision is re-priced, with a warning.
  int seqLen = 0;    ///< 0: not recorded
  std::string dtype; ///< the weights' ("bf16", "f16", "f32"); "": not recorded
  std::string cluster;
  int globalBatch = 0;
  int gradAccum = 1; ///< G: micro-batches per iteration
  /// Interleaved 1F1B (Megatron-LM's virtual pipeline): each stage holds
  /// this many chunks of its layers, assigned round-robin over the stages
  /// (chunk j on stage j % S), which cuts the pipeline's fill and drain by
  /// this factor for that many more p2p transfers. 1: plain 1F1B.
  int virtualStages = 1;
  /// Megatron-LM's sequence parallelism: beside tp, the activations tp
  /// replicates (norms, dropout, residuals) are split along the sequence;
  /// its all-reduces become reduce-scatters and all-gathers.
  bool sequenceParallel = false;
  /// Megatron-LM's --tp-comm-overlap: a layer's tp collectives run in
  /// chunks beside its GEMMs. Needs sequenceParallel.
  bool tpCommOverlap = false;
  /// Selective recomputation: every layer not checkpointed drops the
  /// outputs of its norms and activation functions after the forward and
  /// computes them again before its backward (ir/OpSemantics.h,
  /// recomputedSelectively).
  bool selectiveRecompute = false;
  /// Data-parallel gradient reductions of the last micro-batch run layer by
  /// layer beside its backward (mistc's trainer, DDP, DeepSpeed, Megatron-LM's
  /// --overlap-grad-reduce). false: all of them after the backward, as
  /// Megatron-LM's local DDP did before that flag (its SC'21 runs); priced
  /// and exported, not run.
  bool overlapGradReduce = true;
  std::vector<StagePlan> stages;
  std::optional<PlanPrediction> predicted;
  bool operator==(const Plan &) const = default; ///< exact, doubles included
};

} // namespace mist
