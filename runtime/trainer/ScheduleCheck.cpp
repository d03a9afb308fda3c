//===- ScheduleCheck.cpp - The trainer runs the schedule the model priced -===//
#include "runtime/trainer/ScheduleCheck.h"

#include "runtime/trainer/Trainer.h"

namespace mist::rt {

namespace {

std::string describe(const ScheduleCheck::Entry &e) {
  std::string text = stepName(e.kind);
  if (e.layer >= 0)
    text += " of layer " + std::to_string(e.layer);
  return text + " for micro-batch " + std::to_string(e.microBatch);
}

} // namespace

bool isCheckedStep(StepKind kind) {
  switch (kind) {
  case StepKind::PreForward:
  case StepKind::ReceiveActivations:
  case StepKind::Forward:
  case StepKind::PostForward:
  case StepKind::SendActivations:
  case StepKind::PostBackward:
  case StepKind::ReceiveGradients:
  case StepKind::Recompute:
  case StepKind::Backward:
  case StepKind::PreBackward:
  case StepKind::SendGradients:
  case StepKind::ReduceScatterGradients:
  case StepKind::AllReduceGradients:
  case StepKind::ReducePreGradients:
  case StepKind::ReducePostGradients:
  case StepKind::PreOptimizerStep:
  case StepKind::PostOptimizerStep:
  case StepKind::OptimizerStep:
    return true;
  default:
    return false;
  }
}

StageSchedule scheduleOf(const StageSpec &stage, int stageIndex, int stages, int gradAccum) {
  Plan plan;
  plan.gradAccum = gradAccum;
  plan.stages.resize(size_t(stages)); // only this stage's entry matters besides the count
  StagePlan &sp = plan.stages[size_t(stageIndex)];
  sp.firstLayer = stage.firstLayer;
  sp.lastLayer = stage.firstLayer + stage.layers - 1;
  sp.microBatch = stage.microBatch;
  sp.dp = stage.dp;
  sp.tp = stage.tp;
  sp.ckptLayers = stage.ckptLayers;
  sp.zero = {stage.zeroWeights, stage.zeroGrads, stage.zeroOptimizer};
  sp.offload = {stage.offloadWeights, stage.offloadGrads, stage.offloadOptimizer,
                stage.offloadActivations};
  return buildStageSchedule(plan, stageIndex);
}

ScheduleCheck::ScheduleCheck(const StageSchedule &schedule) : stage(schedule.stage) {
  for (size_t k = 0; k < schedule.order.size(); ++k) {
    const int mb = schedule.order[k].first;
    for (const Step &step : schedule.phases[unsigned(schedule.phaseOf(k))])
      if (isCheckedStep(step.kind))
        expected.push_back({step.kind, step.layer, mb});
  }
}

void ScheduleCheck::record(StepKind kind, int layer, int microBatch) {
  ran.push_back({kind, layer, microBatch});
}

std::string ScheduleCheck::finishStep() {
  auto isUpdate = [](StepKind k) {
    return k == StepKind::OptimizerStep || k == StepKind::PreOptimizerStep ||
           k == StepKind::PostOptimizerStep;
  };
  std::vector<Entry> want; // this step's: without updates when none was pending
  for (const Entry &e : expected)
    if (optimizerExpected || !isUpdate(e.kind))
      want.push_back(e);
  std::string problem;
  const std::string where = "stage " + std::to_string(stage) +
                            " did not run the schedule mistc "
                            "priced: ";
  for (size_t i = 0; i < std::max(want.size(), ran.size()) && problem.empty(); ++i) {
    if (i >= ran.size())
      problem = where + "it stopped before " + describe(want[i]) + " (step " + std::to_string(i) +
                " of " + std::to_string(want.size()) + ")";
    else if (i >= want.size())
      problem = where + "it ran " + describe(ran[i]) + " after the schedule's last step";
    else if (!(ran[i] == want[i]))
      problem = where + "it ran " + describe(ran[i]) + " where the schedule has " +
                describe(want[i]) + " (step " + std::to_string(i) + ")";
  }
  ran.clear();
  return problem;
}

} // namespace mist::rt
