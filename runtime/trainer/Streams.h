//===- Streams.h - The four streams a stage's work runs on ----------------===//
/// \file
/// Every piece of a stage's work runs on one of the four streams the
/// performance model prices (passes/perf: compute, g2g for collectives and
/// pipeline messages, h2d and d2h for offload copies), and work on one
/// stream that needs another's result waits for an event recorded there.
/// On GPU ranks a stream is a CUDA stream and `run` only enqueues; on CPU
/// ranks (this implementation) work runs at once, in program order, which
/// satisfies every event by construction, and each piece is timed for the
/// measured timeline (--trace), one row per stream as in --emit=timeline.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/trainer/TraceWriter.h"
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mist::rt {

enum class StreamKind { Compute = 0, G2G = 1, H2D = 2, D2H = 3 };
constexpr int streamCount = 4;
/// "compute", "g2g", "h2d", "d2h": the names of the predicted timeline's rows.
const char *streamName(StreamKind s);

/// A point in one stream's work: everything run on it before `record`.
struct Event {
  StreamKind stream = StreamKind::Compute;
  uint64_t sequence = 0; ///< pieces of work run on `stream` before it
  bool recorded = false;
};

class Streams {
public:
  /// The step's clock starts; the previous step's timings are dropped.
  void beginStep();
  /// Runs `work` on `stream` after the work every waited-for event marks.
  void run(StreamKind stream, const std::string &name, const std::function<void()> &work);
  Event record(StreamKind stream);
  /// Later work on `stream` starts after `event`'s work is done.
  void wait(StreamKind stream, const Event &event);
  /// Returns when the work of every stream is done.
  void synchronize();
  /// The work run since beginStep, with when.
  const std::vector<TraceEvent> &events() const { return timings; }

private:
  uint64_t done[streamCount] = {}; ///< pieces of work finished per stream
  std::chrono::steady_clock::time_point stepStart = std::chrono::steady_clock::now();
  std::vector<TraceEvent> timings;
};

} // namespace mist::rt
