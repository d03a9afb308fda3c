//===- TraceWriter.cpp - The trainer's measured timeline ------------------===//
#include "runtime/trainer/TraceWriter.h"

#include "runtime/trainer/Streams.h"

#include <cstdio>
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
  std::FILE *f = std::fopen(path.c_str(), "w");
  if (f)
    std::fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
  bool first = true;
  for (size_t s = 0; s < leaders.size(); ++s) {
    std::vector<TraceEvent> events = mine;
    if (leaders[s] != 0) {
      uint64_t size = 0;
      world.recv(&size, sizeof size, leaders[s], traceTag);
      std::string text(size, '\0');
      world.recv(text.data(), size, leaders[s], traceTag);
      events = deserialize(text);
    }
    if (!f)
      continue; // still receive, so the leaders are not left waiting
    std::fprintf(f,
                 "%s  {\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %zu, \"args\": "
                 "{\"name\": \"stage %zu (%s, measured)\"}},\n",
                 first ? "" : ",\n", s, s, model.c_str());
    for (int t = 0; t < streamCount; ++t)
      std::fprintf(f,
                   "%s  {\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": %zu, \"tid\": %d, "
                   "\"args\": {\"name\": \"%s\"}}",
                   t ? ",\n" : "", s, t, streamName(StreamKind(t)));
    for (const TraceEvent &e : events)
      std::fprintf(
          f,
          ",\n  {\"ph\": \"X\", \"name\": \"%s\", \"pid\": %zu, \"tid\": %d, \"ts\": %.3f, "
          "\"dur\": %.3f}",
          e.name.c_str(), s, e.stream, e.start * 1e6, e.duration * 1e6);
    first = false;
  }
  if (!f)
    return false;
  std::fprintf(f, "\n]}\n");
  return std::fclose(f) == 0;
}

} // namespace mist::rt
