//===- TrainerSteps.h - A stage's schedule as calls to the runtime --------===//
/// \file
/// Writes stage i's iteration into train.cu from its stage schedule
/// (schedule/Schedule.h, the steps the performance model priced): one
/// function per phase kind the stage runs, each step one call to
/// mist::rt::StageRunner in the schedule's issue order, runs of layers with
/// the same steps as loops, and `sN_iteration`, the 1F1B order of the
/// step's micro-batches as its warm-up, steady and cool-down phases
/// (docs/trainer-design.md, docs/schedule.md).
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Plan.h"
#include "llvm/Support/raw_ostream.h"

namespace mist {

void emitStageSteps(const Plan &plan, int i, llvm::raw_ostream &os);

} // namespace mist
