//===- Streams.cpp - The four streams a stage's work runs on --------------===//
#include "runtime/trainer/Streams.h"

#include "runtime/comm/MpiCommunicator.h"

namespace mist::rt {

const char *streamName(StreamKind s) {
  switch (s) {
  case StreamKind::Compute:
    return "compute";
  case StreamKind::G2G:
    return "g2g";
  case StreamKind::H2D:
    return "h2d";
  case StreamKind::D2H:
    return "d2h";
  }
  return "?";
}

void Streams::beginStep() {
  timings.clear();
  stepStart = std::chrono::steady_clock::now();
}

void Streams::run(StreamKind stream, const std::string &name, const std::function<void()> &work) {
  auto t0 = std::chrono::steady_clock::now();
  work();
  auto t1 = std::chrono::steady_clock::now();
  ++done[int(stream)];
  timings.push_back({name, std::chrono::duration<double>(t0 - stepStart).count(),
                     std::chrono::duration<double>(t1 - t0).count(), int(stream)});
}

Event Streams::record(StreamKind stream) { return {stream, done[int(stream)], true}; }

void Streams::wait(StreamKind, const Event &event) {
  // In program order, all work recorded before the event has run.
  if (!event.recorded || event.sequence > done[int(event.stream)])
    abortJob(std::string("waiting for an event never recorded on stream ") +
             streamName(event.stream));
}

void Streams::synchronize() {}

} // namespace mist::rt
