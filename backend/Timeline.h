//===- Timeline.h - Predicted stream timeline as Chrome trace JSON --------===//
/// \file
/// Replays one iteration of the plan's 1F1B schedule with the predicted
/// phase times (first, stable and last micro-batch of every stage) and
/// writes it in the Chrome / Perfetto trace-event format: one process per
/// stage, one thread per stream, one complete event per phase and stream.
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/perf/StageModel.h"
#include "llvm/Support/raw_ostream.h"

namespace mist {

/// Returns the simulated iteration time in seconds.
double writeTimeline(const Plan &plan, const PipelineEstimate &est, llvm::raw_ostream &os);

} // namespace mist
