//===- TraceWriter.cpp - The trainer's measured timeline ------------------===//
#include "runtime/trainer/TraceWriter.h"

#include "runtime/trainer/Streams.h"

#include "format/ChromeTrace.h"

#include <fstream>
#include <sstream>

namespace mist::rt {

namespace {

constexpr int traceTag = 30001;

std::string serialize(const std::vector<TraceEvent> &events) {
  std::ostringstream os;
  os.precision(17);
  for (const TraceEvent &e : events)
    os << e.start << ' ' << e.duration << ' ' << e.stream << ' ' << e.name << '\n';
  return os.str();
}

std::vector<TraceEvent> deserialize(const std::string &text) {
  std::vector<TraceEvent> events;
  std::istringstream is(text);
  TraceEvent e;
  while (is >> e.start >> e.duration >> e.stream && std::getline(is >> std::ws, e.name))
    events.push_back(e);
  return events;
}

} // namespace

bool gatherAndWriteTrace(Communicator &world, const std::vector<int> &leaders,
                         const std::vector<TraceEvent> &mine, const std::string &model,
                         const std::string &path) {
  const int me = world.rank();
  if (me != 0) {
    for (int leader : leaders)
      if (leader == me) {
        std::string text = serialize(mine);
        uint64_t size = text.size();
        world.send(&size, sizeof size, 0, traceTag);
        world.send(text.data(), text.size(), 0, traceTag);
      }
    return true;
  }
  std::ofstream file(path);
  ChromeTraceWriter trace(file);
  for (size_t s = 0; s < leaders.size(); ++s) {
    std::vector<TraceEvent> events = mine;
    if (leaders[s] != 0) {
      uint64_t size = 0;
      world.recv(&size, sizeof size, leaders[s], traceTag);
      std::string text(size, '\0');
      world.recv(text.data(), size, leaders[s], traceTag);
      events = deserialize(text);
    }
    // Still received when the file cannot be written, so the leaders are not
    // left waiting.
    const int pid = int(s);
    trace.processName(pid, "stage " + std::to_string(s) + " (" + model + ", measured)");
    for (int t = 0; t < streamCount; ++t)
      trace.threadName(pid, t, streamName(StreamKind(t)));
    for (const TraceEvent &e : events)
      trace.complete(e.name, pid, e.stream, e.start, e.duration);
  }
  trace.finish();
  file.close();
  return bool(file);
}

} // namespace mist::rt
