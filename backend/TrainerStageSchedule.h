//===- TrainerStageSchedule.h - A stage's steps as calls to the runtime ---===//
/// \file
/// Writes stage i's `sN_forward`, `sN_backward` and `sN_optimizer`: the
/// steps of one micro-batch's forward and backward and of the optimizer as
/// calls to mist::rt::StageRunner, each placed and commented as the plan's
/// knobs say (docs/trainer-design.md, docs/schedule.md).
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Plan.h"
#include "llvm/Support/raw_ostream.h"

namespace mist {

void emitStageSchedule(const Plan &plan, int i, llvm::raw_ostream &os);

} // namespace mist
