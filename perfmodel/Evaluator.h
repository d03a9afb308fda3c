//===- Evaluator.h - Scoring many strategies of one stage context ---------===//
/// \file
/// The tuner's inner loop: for one stage context (layers, micro-batch, dp,
/// tp, mesh, pipeline position, G) the model's symbolic costs are evaluated
/// once into StageConstants; each candidate strategy (ZeRO flags, offload
/// ratios, checkpointed layers) is then scored with plain arithmetic by the
/// same estimateStage() the report uses, so search and report never disagree.
//===----------------------------------------------------------------------===//
#pragma once

#include "perfmodel/StageModel.h"

namespace mist {

/// The part of StageKnobs fixed for a batch.
struct StageContext {
  int layers = 1;
  int microBatch = 1, dp = 1, tp = 1;
  int meshNodes = 1, meshGpusPerNode = 1;
  bool first = true, last = true;
  int inflight = 1, gradAccum = 1;
  bool sequenceParallel = false, tpCommOverlap = false; ///< StageKnobs'
  bool selectiveRecompute = false;                      ///< StageKnobs'
};

/// Candidate strategies, one entry per strategy.
class StrategyBatch {
public:
  void add(ZeroFlags z, OffloadRatios o, int ckpt);
  size_t size() const { return items.size(); }
  /// Consecutive strategies with the same ZeRO flags and offload ratios form
  /// a group (they differ only in the checkpoint count); group g is
  /// [groupStart(g), groupStart(g + 1)).
  size_t numGroups() const { return groupStarts.size(); }
  size_t groupStart(size_t g) const {
    return g < groupStarts.size() ? groupStarts[g] : items.size();
  }
  struct Item {
    ZeroFlags zero;
    OffloadRatios offload;
    int ckpt;
  };
  const Item &operator[](size_t i) const { return items[i]; }

private:
  std::vector<Item> items;
  std::vector<size_t> groupStarts;
};

struct StrategyResult {
  double t = 0, d = 0, peakBytes = 0;
  double perInflightBytes = 0;                    ///< peak growth per extra in-flight micro-batch
  double hostBytes = 0, hostPerInflightBytes = 0; ///< pinned host memory, and its growth
  bool fits = false;
};

class StageEvaluator {
public:
  StageEvaluator(const ModelProfile &model, const Cluster &cluster, const StageContext &ctx);
  /// With the regions already evaluated at the context's micro-batch, tp
  /// and sequence parallelism.
  StageEvaluator(const StageNumbers &numbers, const Cluster &cluster, const StageContext &ctx);
  /// Scores every strategy; `out` must have batch.size() entries. With
  /// `timesOfFitsOnly`, strategies over the memory budget get t = d = +inf
  /// without their times being computed (the tuner drops them anyway).
  void evaluate(const StrategyBatch &batch, std::vector<StrategyResult> &out,
                bool timesOfFitsOnly = false) const;

private:
  StageKnobs base;
  StageConstants constants;
  InterferenceTable interference;
};

} // namespace mist
