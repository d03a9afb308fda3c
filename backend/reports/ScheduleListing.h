//===- ScheduleListing.h - `mistc --emit=schedule` ------------------------===//
/// \file
/// Every stage's schedule (schedule/Schedule.h) as a reader's listing: the
/// 1F1B order, then each phase kind that runs, one line per step with its
/// stream, its layer (the model's numbering), what it does under the
/// stage's knobs, and the steps it waits for.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Plan.h"
#include "schedule/Schedule.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mist {

/// What `step` of phase `phase` of a stage does under its knobs, in words.
std::string describeStep(const Step &step, Phase phase, const StageSchedule &schedule,
                         int chunk = 0);

void printSchedule(const Plan &plan, llvm::raw_ostream &os);

} // namespace mist
