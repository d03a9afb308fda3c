//===- Streams.cpp - The four streams a stage's work runs on --------------===//
#include "runtime/trainer/Streams.h"

#include "runtime/comm/MpiCommunicator.h"

namespace mist::rt {

Streams::Streams(bool concurrent) {
  // Compute is the calling thread's own stream on CPU ranks: the work the
  // runtime does between runs (handing buffers in and out, freeing them)
  // is compute-stream work, as it is enqueued there on a GPU.
  for (int k = 0; k < streamCount; ++k)
    streams[k] = device::createStream(k != int(StreamKind::Compute) && concurrent);
  device::setCurrentStream(streams[int(StreamKind::Compute)]);
}

Streams::~Streams() {
  device::synchronizeDevice();
  for (device::EventHandle e : marks)
    device::destroyEvent(e);
  device::setCurrentStream(nullptr);
  for (device::Stream s : streams)
    device::destroyStream(s);
}

device::EventHandle Streams::mark(StreamKind stream) {
  if (marksUsed == marks.size())
    marks.push_back(device::createEvent());
  device::EventHandle e = marks[marksUsed++];
  device::recordEvent(e, streams[int(stream)]);
  return e;
}

void Streams::beginStep() {
  timed.clear();
  marksUsed = 0;
  mark(StreamKind::Compute); // marks[0]: the step's start
}

void Streams::run(StreamKind stream, const std::string &name, const std::function<void()> &work) {
  const size_t begin = marksUsed;
  mark(stream);
  device::launch(streams[int(stream)], work);
  mark(stream);
  timed.push_back({name, stream, begin, marksUsed - 1});
}

void Streams::runFenced(StreamKind stream, const std::string &name,
                        const std::function<void()> &work) {
  if (stream == StreamKind::Compute)
    return run(stream, name, work);
  wait(stream, record(StreamKind::Compute));
  run(stream, name, work);
  wait(StreamKind::Compute, record(stream));
}

Event Streams::record(StreamKind stream) {
  Event e;
  e.stream = stream;
  e.handle = std::shared_ptr<void>(device::createEvent(), device::destroyEvent);
  device::recordEvent(e.handle.get(), streams[int(stream)]);
  return e;
}

void Streams::wait(StreamKind stream, const Event &event) {
  if (!event.recorded())
    abortJob(std::string("waiting for an event never recorded on stream ") +
             streamName(event.stream));
  device::waitEvent(streams[int(stream)], event.handle.get());
}

void Streams::synchronize() { device::synchronizeDevice(); }

std::vector<TraceEvent> Streams::events() const {
  std::vector<TraceEvent> out;
  if (marks.empty())
    return out;
  for (const Timed &t : timed)
    out.push_back({t.name, device::elapsedMs(marks[0], marks[t.begin]) / 1e3,
                   device::elapsedMs(marks[t.begin], marks[t.end]) / 1e3, int(t.stream)});
  return out;
}

} // namespace mist::rt
