//===- Tuner.h - Finds the fastest plan that fits -------------------------===//
/// \file
/// For every number of stages S (dividing the GPUs, uniform meshes), every
/// G dividing the global batch and every tp: each stage context (position,
/// layer count, tp, micro-batch) scores all strategies of the search space
/// with the stage evaluator, drops those over the memory budget and keeps
/// K Pareto points of (t, d/G); one MILP per (G, S) then picks the layer
/// split and a point per stage (one MILP per tp as well in the megatron
/// space). The best plan is re-scored with estimatePlan.
//===----------------------------------------------------------------------===//
#pragma once

#include "perfmodel/StageModel.h"
#include "tuner/SearchSpace.h"

namespace mist {

struct TunerOptions {
  SearchSpace space;
  size_t paretoLimit = 0;      ///< K; 0 keeps whole frontiers (exact)
  double timeLimitSeconds = 0; ///< 0: no limit
  std::string dumpMilpDir;     ///< write every MILP as an LP file here
  bool progress = false;       ///< progress lines on stderr
};

struct TuneStats {
  uint64_t evaluations = 0, milps = 0, contexts = 0;
  double seconds = 0;
  bool timedOut = false;
  /// The (micro-batch, tp) pairs the model was evaluated at, sorted.
  std::vector<std::pair<int, int>> stageShapes;
};

struct TuneResult {
  Plan plan;
  PipelineEstimate estimate;
  double objective = 0; ///< the MILP's iteration time
  TuneStats stats;
};

/// Reports why when no plan fits (smallest memory any plan would need, or
/// the divisibility that fails) and returns nullopt.
std::optional<TuneResult> tune(const ModelProfile &model, const Cluster &cluster,
                               int64_t globalBatch, const TunerOptions &opts,
                               DiagnosticEngine &diag);

/// The (micro-batch, tp) pairs at which tune() evaluates the model with the
/// same arguments (its stage contexts), sorted: for every stage count, stage
/// mesh and G of the search space, each tp the model and cluster allow
/// whose data-parallel degree splits the batch. tune() evaluates exactly
/// these unless its time limit stops it early (TuneStats::stageShapes).
/// Empty when the global batch is not set or no tp is valid.
std::vector<std::pair<int, int>> tunerStageShapes(const ModelProfile &model, const Cluster &cluster,
                                                  int64_t globalBatch, const TunerOptions &opts);

} // namespace mist
