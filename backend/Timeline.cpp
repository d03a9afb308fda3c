//===- Timeline.cpp - Predicted stream timeline as Chrome trace JSON ------===//
#include "backend/Timeline.h"

#include "backend/Schedule.h"

#include <algorithm>
#include <fmt/format.h>

using namespace mist;

const char *mist::timelineRowName(unsigned row) {
  static const char *names[numTimelineRows] = {"compute", "gpu<->gpu", "host->gpu", "gpu->host",
                                               "tp collectives"};
  return row < numTimelineRows ? names[row] : "?";
}

SimulatedTimeline mist::simulateTimeline(const Plan &plan, const PipelineEstimate &est) {
  const int S = static_cast<int>(est.stages.size()), G = plan.gradAccum;
  std::vector<std::vector<double>> fwdEnd(S, std::vector<double>(G, 0)),
      bwdEnd(S, std::vector<double>(G, 0));
  std::vector<std::vector<std::pair<int, bool>>> orders;
  std::vector<size_t> next(S, 0);
  std::vector<double> free(S, 0);
  for (int i = 0; i < S; ++i)
    orders.push_back(oneFOneB(i, S, G));
  std::vector<TimelineEvent> events;
  // Process ready work in order until every stage has run its schedule.
  bool progress = true;
  while (progress) {
    progress = false;
    for (int i = 0; i < S; ++i) {
      while (next[i] < orders[i].size()) {
        auto [mb, forward] = orders[i][next[i]];
        const StageEstimate &e = est.stages[i];
        double half = e.p2p / 2; // send time of each direction, as added to t
        double ready;
        if (forward) {
          if (i > 0 && fwdEnd[i - 1][mb] == 0)
            break;
          ready = i > 0 ? fwdEnd[i - 1][mb] + half : 0;
        } else {
          if (fwdEnd[i][mb] == 0 || (i + 1 < S && bwdEnd[i + 1][mb] == 0))
            break;
          ready = i + 1 < S ? bwdEnd[i + 1][mb] + half : fwdEnd[i][mb];
        }
        const PhaseLoad &p = forward ? (mb == 0 ? e.fwdFirst : e.fwdStable)
                                     : (mb == G - 1 ? e.bwdLast : e.bwdStable);
        double start = std::max(ready, free[i]);
        std::string name = fmt::format("{}{}", forward ? "F" : "B", mb);
        // What the compute stream waits for beyond its own work and the tp collectives.
        double exposed = std::max(0.0, p.elapsed - p.busy[0] - p.tp);
        events.push_back({i, 0, name, start, p.elapsed, exposed});
        for (unsigned s = 1; s < numStreams; ++s)
          if (p.busy[s] > 0)
            events.push_back({i, s, name, start, p.busy[s]});
        if (p.tp > 0)
          events.push_back({i, 4, name + " tp", start, p.tp});
        double end = start + p.elapsed;
        (forward ? fwdEnd : bwdEnd)[i][mb] = std::max(end, 1e-12);
        free[i] = end;
        ++next[i];
        progress = true;
      }
    }
  }
  return {std::move(events), *std::max_element(free.begin(), free.end())};
}

double mist::writeTimeline(const Plan &plan, const PipelineEstimate &est, llvm::raw_ostream &os) {
  const int S = static_cast<int>(est.stages.size());
  SimulatedTimeline sim = simulateTimeline(plan, est);
  os << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  bool firstEvent = true;
  auto emit = [&](const std::string &json) {
    os << (firstEvent ? "  " : ",\n  ") << json;
    firstEvent = false;
  };
  for (int i = 0; i < S; ++i) {
    emit(fmt::format("{{\"ph\": \"M\", \"name\": \"process_name\", \"pid\": {}, \"args\": "
                     "{{\"name\": \"stage {} (layers {}-{})\"}}}}",
                     i, i, plan.stages[i].firstLayer, plan.stages[i].lastLayer));
    for (unsigned t = 0; t < numTimelineRows; ++t)
      emit(fmt::format("{{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": {}, \"tid\": {}, "
                       "\"args\": {{\"name\": \"{}\"}}}}",
                       i, t, timelineRowName(t)));
  }
  for (const TimelineEvent &e : sim.events)
    emit(fmt::format("{{\"ph\": \"X\", \"name\": \"{}\", \"pid\": {}, \"tid\": {}, \"ts\": {:.3f}, "
                     "\"dur\": {:.3f}}}",
                     e.name, e.stage, e.stream, e.start * 1e6, e.duration * 1e6));
  os << "\n], \"otherData\": {\"predicted_iteration_s\": "
     << fmt::format("{:.6g}", est.iterationSeconds)
     << ", \"simulated_iteration_s\": " << fmt::format("{:.6g}", sim.seconds) << "}}\n";
  return sim.seconds;
}
