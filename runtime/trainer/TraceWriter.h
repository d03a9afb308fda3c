//===- TraceWriter.h - The trainer's measured timeline --------------------===//
/// \file
/// `--trace FILE` writes the regions every stage ran in the last step, with
/// their measured times, in the Chrome / Perfetto trace format mistc's
/// --emit=timeline uses for the predicted one: one process per stage (its
/// first rank's view), one thread per stream, one event per piece of work.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/comm/Communicator.h"
#include <string>
#include <vector>

namespace mist::rt {

struct TraceEvent {
  std::string name;
  double start, duration; ///< seconds from the step's start
  int stream = 0;         ///< row: 0 compute, 1 g2g, 2 h2d, 3 d2h (runtime/trainer/Streams.h)
};

/// Collective over `world`: the first rank of every stage (`leaders`, world
/// ranks in stage order) sends its events to world rank 0, which writes the
/// file. Returns false on rank 0 when the file cannot be written.
bool gatherAndWriteTrace(Communicator &world, const std::vector<int> &leaders,
                         const std::vector<TraceEvent> &mine, const std::string &model,
                         const std::string &path);

} // namespace mist::rt
