//===- Timeline.h - Predicted stream timeline as Chrome trace JSON --------===//
/// \file
/// Replays one iteration of the plan's 1F1B schedule with the predicted
/// phase times (first, stable and last micro-batch of every stage) and
/// writes it in the Chrome / Perfetto trace-event format: one process per
/// stage, one thread per stream, one complete event per phase and stream.
//===----------------------------------------------------------------------===//
#pragma once

#include "perfmodel/StageModel.h"
#include "llvm/Support/raw_ostream.h"
#include <string>
#include <vector>

namespace mist {

/// One busy interval of one stream of one stage.
struct TimelineEvent {
  int stage;
  unsigned stream;        ///< 0..3: compute, gpu<->gpu, host->gpu, gpu->host; 4: tp collectives
  std::string name;       ///< the micro-batch: F3 is its forward, B3 its backward
  double start, duration; ///< seconds
  double exposed = 0;     ///< compute events: the tail spent waiting on transfers
};
constexpr unsigned numTimelineRows = 5;
const char *timelineRowName(unsigned row);

struct SimulatedTimeline {
  std::vector<TimelineEvent> events;
  double seconds = 0; ///< the simulated iteration
};

/// Replays one iteration of the plan's 1F1B schedule with the predicted phase times.
SimulatedTimeline simulateTimeline(const Plan &plan, const PipelineEstimate &est);

/// Chrome / Perfetto trace JSON. Returns the simulated iteration time in seconds.
double writeTimeline(const Plan &plan, const PipelineEstimate &est, llvm::raw_ostream &os);

/// An SVG picture of the same timeline for a browser: one row per stage and
/// stream, micro-batches labelled, exposed communication in red. Returns the
/// simulated iteration time in seconds.
double writeTimelineSvg(const Plan &plan, const PipelineEstimate &est, llvm::raw_ostream &os);

} // namespace mist
