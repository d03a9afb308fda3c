//===- Timeline.cpp - Predicted stream timeline as Chrome trace JSON ------===//
#include "backend/reports/Timeline.h"

#include "format/ChromeTrace.h"
#include "schedule/Schedule.h"

#include <algorithm>
#include <fmt/format.h>
#include <sstream>

using namespace mist;

const char *mist::timelineRowName(unsigned row) {
  if (row < numStreams)
    return streamLabel(static_cast<Stream>(row));
  return row == numStreams ? "tp collectives" : "?";
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
  std::ostringstream text;
  ChromeTraceWriter trace(text);
  for (int i = 0; i < S; ++i) {
    trace.processName(i, fmt::format("stage {} (layers {}-{})", i, plan.stages[i].firstLayer,
                                     plan.stages[i].lastLayer));
    for (unsigned t = 0; t < numTimelineRows; ++t)
      trace.threadName(i, int(t), timelineRowName(t));
  }
  for (const TimelineEvent &e : sim.events)
    trace.complete(e.name, e.stage, int(e.stream), e.start, e.duration);
  trace.finish(
      {{"predicted_iteration_s", est.iterationSeconds}, {"simulated_iteration_s", sim.seconds}});
  os << text.str();
  return sim.seconds;
}
