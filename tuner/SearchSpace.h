//===- SearchSpace.h - The knobs the tuner may turn -----------------------===//
/// \file
/// Which values each knob may take. `--space` restricts the space to
/// reproduce the seed's ablation:
///   megatron  uniform 3D parallelism: one tp for all stages, even layer
///             split, micro-batch, full or no recomputation, ZeRO-1 (the
///             distributed optimizer) when dp > 1, no offload, objective
///             blind to the first/last micro-batch imbalance
///   +zero     adds ZeRO-0/2/3
///   +ckpt     adds any number of checkpointed layers per stage
///   +offload  adds the offload-ratio grid
///   full      adds imbalance awareness, a tp per stage and uneven layer
///             splits (within `layerSlack` of the even split)
/// The levels below `full` split the layers evenly and refuse a stage count
/// that does not divide them (Megatron-LM's rule); megatron and +zero
/// recompute all layers of every stage or none (Megatron-LM's full
/// recomputation), +ckpt lets each stage choose how many.
///   deepspeed what DeepSpeed with Megatron-LM's tensor parallelism runs:
///             one tp, near-even layer splits (its partitioning by parameter
///             counts), ZeRO 0-3 but at most ZeRO-1 with a pipeline, full
///             recomputation or none, ZeRO-Offload (optimizer state with
///             the gradients wholly on the host), ZeRO-3's parameter
///             offload (all weights), activation checkpoints offloaded
///             (all) only when recomputing; no partial ratios, objective
///             blind to the imbalance
/// G may be any divisor of the global batch, the micro-batch any divisor of
/// the per-replica batch.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Plan.h"
#include "llvm/ADT/StringRef.h"
#include <optional>
#include <string>
#include <vector>

namespace mist {

enum class SpaceLevel { Megatron = 0, Zero = 1, Ckpt = 2, Offload = 3, Full = 4, DeepSpeed = 5 };
std::optional<SpaceLevel> parseSpaceLevel(llvm::StringRef s);
const char *spaceLevelName(SpaceLevel s);

/// The plan-wide knobs: how tp runs (plain: all-reduces between the GEMMs;
/// with sequence parallelism; with tp-communication overlap on top), and
/// whether the layers not checkpointed recompute selectively.
struct PlanWideChoice {
  bool sequenceParallel = false, commOverlap = false;
  bool selectiveRecompute = false;
};

struct SearchSpace {
  SpaceLevel level = SpaceLevel::Full;
  /// Offload grids (the seed's: sparse for weights/grads, dense for optimizer state and
  /// activations).
  std::vector<double> weightGradRatios = {0, .25, .375, .5, .75, 1};
  std::vector<double> optActRatios = {0, .25, .375, .5, .625, .75, .875, 1};
  int layerSlack = 2; ///< layer counts within this of the even split (full space)
  /// Checkpoint counts tried per stage: every count up to this many, else
  /// this many evenly spaced from none to all (bounds a stage's strategies).
  int maxCkptOptions = 129;
  /// Stages may differ in their number of GPUs (full space only): each
  /// stage's mesh is a whole number of nodes or a divisor of a node, within
  /// a factor of 2 of the even share, never growing along the pipeline.
  bool nonUniformMeshes = false;
  /// Whether plans may use Megatron-LM's sequence parallelism and, with it,
  /// tp-communication overlap. Off by default: mistc's trainer runs tp
  /// without them; the driver allows them when the plan is for a framework
  /// that runs them (--emit=megatron: both; --emit=torchtitan: sequence
  /// parallelism) or when asked to.
  bool sequenceParallel = false, tpCommOverlap = false;
  /// Whether plans may use selective recomputation (plan key
  /// selective_recompute): off by default, on when asked to
  /// (--selective-recompute).
  bool selectiveRecompute = false;
  /// Whether plans may use interleaved 1F1B (virtual stages). Off by
  /// default, so that tuned plans stay what the timeline can replay; on for
  /// --emit=megatron|torchtitan or when asked to (--interleave; the trainer
  /// runs them).
  bool interleaving = false;

  bool zeroLevels() const { return level != SpaceLevel::Megatron; }
  bool flexibleCkpt() const {
    return level == SpaceLevel::Ckpt || level == SpaceLevel::Offload || level == SpaceLevel::Full;
  }
  /// Every stage recomputes all its layers or none, alike (the tuner
  /// searches each choice in turn).
  bool uniformCkpt() const { return !flexibleCkpt(); }
  bool offload() const { return level == SpaceLevel::Offload || level == SpaceLevel::Full; }
  bool imbalanceAware() const { return level == SpaceLevel::Full; }
  bool tpPerStage() const { return level == SpaceLevel::Full; }
  /// Layer counts must split evenly: a stage count that does not divide
  /// the layers is not in the space.
  bool evenLayers() const { return level < SpaceLevel::Full; }

  /// The plan-wide tp settings to search: plain tp always, then sequence
  /// parallelism and tp-communication overlap where allowed.
  std::vector<PlanWideChoice> planWideChoices() const;

  /// Whether a stage of a `stages`-stage pipeline may combine these knobs
  /// (the deepspeed space's rules; every combination elsewhere).
  bool allows(const ZeroFlags &z, const OffloadRatios &o, int ckpt, int layers, int stages) const;

  /// ZeRO settings to try with this dp.
  std::vector<ZeroFlags> zeroOptions(int dp) const;
  /// Offload settings (weights, grads, optimizer, activations).
  std::vector<OffloadRatios> offloadOptions() const;
  /// Checkpointed-layer counts for a stage of `layers` layers; in a
  /// uniform-recomputation space, `recomputeAll` says which of none or all.
  std::vector<int> ckptOptions(int layers, bool recomputeAll = false) const;
  /// Layer counts a stage may take when `stages` stages share `total` layers.
  std::vector<int> layerOptions(int total, int stages) const;
  /// The same for a stage holding `gpus` of `totalGpus` GPUs: around its
  /// share total * gpus / totalGpus of the layers.
  std::vector<int> layerOptionsForShare(int total, int stages, int gpus, int totalGpus) const;
  /// Mesh sizes the stages of an S-stage pipeline may use with non-uniform
  /// meshes: valid meshes within a factor of 2 of the even share (empty
  /// when there are fewer than two or no mix can add up).
  std::vector<int> nonUniformMeshSizes(int stages, int totalGpus, int gpusPerNode) const;
};

std::vector<int64_t> divisorsOf(int64_t n);
/// ", sequence parallel" and the like, for progress lines ("" for plain tp).
std::string planWideChoiceText(const PlanWideChoice &c);

} // namespace mist
