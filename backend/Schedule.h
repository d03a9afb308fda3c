//===- Schedule.h - The per-stage step sequence a plan implies ------------===//
/// \file
/// What each pipeline stage does in one iteration, step by step and stream by
/// stream: the 1F1B order of micro-batches, and for each of the four phase
/// kinds (the first forward, a stable forward, a stable backward, the last
/// backward) the per-layer sequence of compute, collectives and host copies
/// the plan's knobs call for. It is the same story the performance model
/// prices (passes/perf/StageModel.cpp, layerLoad) told as steps, and the
/// backbone of the emitted trainer: `--emit=schedule` prints it.
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/perf/Plan.h"
#include "llvm/Support/raw_ostream.h"
#include <string>
#include <utility>
#include <vector>

namespace mist {

/// The 1F1B order of stage i of S with G micro-batches: min(S - i - 1, G)
/// warm-up forwards, then one forward and one backward alternately, then the
/// remaining backwards. Entries are (micro-batch, isForward).
std::vector<std::pair<int, bool>> oneFOneB(int stage, int stages, int gradAccum);

enum class ScheduleStream { Compute, G2G, H2D, D2H };
const char *scheduleStreamName(ScheduleStream s);

enum class PhaseKind { FirstForward, Forward, Backward, LastBackward };
const char *phaseKindName(PhaseKind p);

/// One step: `what` happens on `stream` for `layer` (-1: the stage as a
/// whole, e.g. receiving activations).
struct ScheduleStep {
  ScheduleStream stream;
  int layer;
  std::string what;
};

struct StageSchedule {
  int stage = 0;
  std::vector<std::pair<int, bool>> order; ///< 1F1B (micro-batch, isForward)
  std::vector<ScheduleStep> phases[4];     ///< indexed by PhaseKind
  /// Which phase kind runs for entry k of `order`.
  PhaseKind phaseOf(size_t k, int gradAccum) const;
};

StageSchedule buildStageSchedule(const Plan &plan, int stage);

/// Human-readable listing of every stage's schedule.
void printSchedule(const Plan &plan, llvm::raw_ostream &os);

} // namespace mist
