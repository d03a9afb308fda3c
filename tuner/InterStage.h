//===- InterStage.h - The MILP that splits layers and picks strategies ----===//
/// \file
/// Given, for every stage i and layer count l, a list of candidate
/// strategies with steady time t and extra time d, choose one (l, k) per
/// stage so the layer counts sum to L and the 1F1B iteration time
///   (G-1) Max_t + sum_i T_i + Max_d,  Max_t >= T_i,  Max_d >= D_i - sum_{j<i} T_j
/// is minimal. Solved exactly with GLPK; `bruteForce` enumerates the same
/// choices for tests.
//===----------------------------------------------------------------------===//
#pragma once

#include "tuner/Milp.h"
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mist {

struct StageCandidate {
  double t = 0, d = 0;
  size_t config = 0; ///< the caller's index of the strategy
  int gpus = 0;      ///< the stage's GPUs, for the device constraint (non-uniform meshes)
};

/// candidates[i] maps a layer count to the options of stage i with that many layers.
using StageTable = std::vector<std::map<int, std::vector<StageCandidate>>>;

struct InterStageChoice {
  std::vector<int> layers;     ///< per stage
  std::vector<size_t> configs; ///< per stage
  double objective = 0;
};

struct InterStageOptions {
  int totalLayers = 1;
  int gradAccum = 1;
  bool imbalanceAware = true;   ///< false drops Max_d (the megatron ablation)
  double upperBound = INFINITY; ///< prune: skip when no solution can beat this
  double timeLimitSeconds = 0;
  std::string dumpPath; ///< write the LP here when set
  /// Non-uniform meshes: when > 0 the chosen candidates' `gpus` sum to this,
  /// and never grow along the pipeline (so every mesh starts on a multiple
  /// of its size and no stage straddles nodes it does not fill).
  int totalGpus = 0;
};

/// nullopt when no split is feasible (or none beats the upper bound).
std::optional<InterStageChoice> solveInterStage(const StageTable &table,
                                                const InterStageOptions &opts,
                                                SolveStatus *status = nullptr);

/// Exhaustive search over the same choices (small cases only).
std::optional<InterStageChoice> bruteForceInterStage(const StageTable &table,
                                                     const InterStageOptions &opts);

/// The objective of a choice, by the pipeline formula.
double interStageObjective(const std::vector<double> &t, const std::vector<double> &d, int G,
                           bool imbalanceAware);

} // namespace mist
