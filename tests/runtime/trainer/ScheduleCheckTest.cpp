//===- ScheduleCheckTest.cpp - The trainer's check against the schedule ---===//
/// The runtime expands a stage's schedule over its 1F1B order, accepts the
/// steps in that order and names the first one that differs otherwise.
//===----------------------------------------------------------------------===//
#include "runtime/trainer/ScheduleCheck.h"
#include "runtime/trainer/Trainer.h"

#include <gtest/gtest.h>

using namespace mist;
using namespace mist::rt;

namespace {

/// The middle stage of three: two layers, the last checkpointed, dp 2, G = 2.
StageSchedule middleStage() {
  StageSpec s;
  s.firstLayer = 4;
  s.layers = 2;
  s.ckptLayers = 1;
  s.dp = 2;
  return scheduleOf(s, 1, 3, 2);
}

TEST(ScheduleCheck, ExpandsThePhasesOverTheOneFOneBOrder) {
  ScheduleCheck check(middleStage());
  using E = ScheduleCheck::Entry;
  const std::vector<E> expected = {
      // stage 1 of 3: one warm-up forward, then F1 B0, then B1; the first
      // forward runs the last step's update of each layer before its
      // forward, the last backward reduces each layer's gradients after its
      // backward
      {StepKind::ReceiveActivations, -1, 0},
      {StepKind::OptimizerStep, 0, 0},
      {StepKind::Forward, 0, 0},
      {StepKind::OptimizerStep, 1, 0},
      {StepKind::Forward, 1, 0},
      {StepKind::SendActivations, -1, 0},
      {StepKind::ReceiveActivations, -1, 1},
      {StepKind::Forward, 0, 1},
      {StepKind::Forward, 1, 1},
      {StepKind::SendActivations, -1, 1},
      {StepKind::ReceiveGradients, -1, 0},
      {StepKind::Recompute, 1, 0},
      {StepKind::Backward, 1, 0},
      {StepKind::Backward, 0, 0},
      {StepKind::SendGradients, -1, 0},
      {StepKind::ReceiveGradients, -1, 1},
      {StepKind::Recompute, 1, 1},
      {StepKind::Backward, 1, 1},
      {StepKind::AllReduceGradients, 1, 1},
      {StepKind::Backward, 0, 1},
      {StepKind::AllReduceGradients, 0, 1},
      {StepKind::SendGradients, -1, 1},
  };
  EXPECT_EQ(check.expectedSteps(), expected);
  for (const E &e : expected)
    check.record(e.kind, e.layer, e.microBatch);
  EXPECT_EQ(check.finishStep(), "");
  // The record starts again each step.
  for (const E &e : expected)
    check.record(e.kind, e.layer, e.microBatch);
  EXPECT_EQ(check.finishStep(), "");
  // A step with no update pending (a run's first, or the one after a
  // checkpoint) runs the same without the updates, and must.
  check.expectOptimizerSteps(false);
  for (const E &e : expected)
    if (e.kind != StepKind::OptimizerStep)
      check.record(e.kind, e.layer, e.microBatch);
  EXPECT_EQ(check.finishStep(), "");
  for (const E &e : expected)
    check.record(e.kind, e.layer, e.microBatch);
  EXPECT_EQ(check.finishStep(),
            "stage 1 did not run the schedule mistc priced: it ran optimizer-step of layer 0 for "
            "micro-batch 0 where the schedule has forward of layer 0 for micro-batch 0 (step 1)");
}

TEST(ScheduleCheck, NamesTheFirstStepThatDiffers) {
  ScheduleCheck check(middleStage());
  std::vector<ScheduleCheck::Entry> steps = check.expectedSteps();
  std::swap(steps[11], steps[12]); // backward before its recomputation
  for (const auto &e : steps)
    check.record(e.kind, e.layer, e.microBatch);
  EXPECT_EQ(check.finishStep(),
            "stage 1 did not run the schedule mistc priced: it ran backward of layer 1 for "
            "micro-batch 0 where the schedule has recompute of layer 1 for micro-batch 0 "
            "(step 11)");

  steps = check.expectedSteps();
  steps.pop_back();
  for (const auto &e : steps)
    check.record(e.kind, e.layer, e.microBatch);
  EXPECT_NE(check.finishStep().find("it stopped before send-gradients for micro-batch 1"),
            std::string::npos);
}

} // namespace
