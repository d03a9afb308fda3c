//===- ScheduleCheck.h - The trainer runs the schedule the model priced ---===//
/// \file
/// Every step of training, each rank compares the compute and pipeline
/// steps and the gradient reductions its stage ran (region runs,
/// recomputations, activations and gradients sent and received, reductions
/// over dp, with their micro-batch) against the stage schedule
/// (schedule/Schedule.h) the performance model prices, expanded over the
/// 1F1B order. The schedule is rebuilt here from the stage's table in
/// train.cu, by the same code mistc uses; a difference ends the job naming
/// the first step that differs. The offload copies are not compared:
/// docs/schedule.md says where the trainer still places them differently.
//===----------------------------------------------------------------------===//
#pragma once

#include "schedule/Schedule.h"

#include <string>
#include <vector>

namespace mist::rt {

struct StageSpec;

/// The steps ScheduleCheck compares: what runs on the compute stream (the
/// optimizer updates included), the pipeline messages and the gradient
/// reductions.
bool isCheckedStep(StepKind kind);

/// The stage's schedule as train.cu describes the stage (its index, the
/// pipeline's length and G).
StageSchedule scheduleOf(const StageSpec &stage, int stageIndex, int stages, int gradAccum);

class ScheduleCheck {
public:
  explicit ScheduleCheck(const StageSchedule &schedule);

  /// A step the trainer ran (layer: the stage's index, -1 for the stage's own).
  void record(StepKind kind, int layer, int microBatch);
  /// Whether this step's first forward runs the last step's optimizer
  /// update (not in a run's first step, nor after a checkpoint ran it).
  void expectOptimizerSteps(bool expect) { optimizerExpected = expect; }
  /// At the end of a training step: "" when the recorded steps are the
  /// schedule's, else what differs first. Starts the next step's record.
  std::string finishStep();

  struct Entry {
    StepKind kind;
    int layer, microBatch;
    bool operator==(const Entry &) const = default;
  };
  const std::vector<Entry> &expectedSteps() const { return expected; }

private:
  std::vector<Entry> expected, ran;
  int stage;
  bool optimizerExpected = true;
};

} // namespace mist::rt
