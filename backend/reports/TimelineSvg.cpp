//===- TimelineSvg.cpp - The predicted timeline as a picture --------------===//
/// \file
/// One row per stage and busy stream, time to the right. Forwards are blue,
/// backwards green, collectives orange, host copies purple, tp collectives
/// grey; the part of a compute block spent waiting on transfers is red.
/// Blocks wide enough carry their micro-batch (F3, B3).
//===----------------------------------------------------------------------===//
#include "backend/reports/Timeline.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

using namespace mist;

namespace {

constexpr double labelWidth = 190, plotWidth = 1100, rowHeight = 18, rowGap = 4, stageGap = 14;
constexpr double top = 56, legendHeight = 40;

const char *fillOf(const TimelineEvent &e) {
  bool forward = !e.name.empty() && e.name[0] == 'F';
  switch (e.stream) {
  case 0:
    return forward ? "#4e79a7" : "#59a14f";
  case 1:
    return "#f28e2b";
  case 2:
  case 3:
    return "#b07aa1";
  default:
    return "#9d9d9d";
  }
}

/// A tick step of 1, 2 or 5 times a power of ten giving about 10 ticks.
double tickStep(double total) {
  double raw = total / 10, power = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * power >= raw)
      return m * power;
  return 10 * power;
}

std::string timeText(double seconds) {
  return seconds >= 1 ? fmt::format("{:g} s", seconds) : fmt::format("{:g} ms", seconds * 1e3);
}

std::string escape(const std::string &s) {
  std::string out;
  for (char c : s)
    out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}

/// Where a time falls on the plot, in pixels from the left.
struct TimeScale {
  double total;
  double operator()(double t) const { return labelWidth + t / total * plotWidth; }
};

/// The rows: every stage's compute row, plus the streams it uses.
struct RowLayout {
  std::vector<std::vector<double>> rowY; ///< [stage][row] top, -1 when absent
  double bottom = top;                   ///< below the last stage's gap
};

RowLayout layoutRows(const SimulatedTimeline &sim, int S) {
  std::vector<std::vector<bool>> used(S, std::vector<bool>(numTimelineRows, false));
  for (const TimelineEvent &e : sim.events)
    used[e.stage][e.stream] = true;
  RowLayout l;
  l.rowY.assign(S, std::vector<double>(numTimelineRows, -1));
  double y = top;
  for (int i = 0; i < S; ++i) {
    used[i][0] = true;
    for (unsigned r = 0; r < numTimelineRows; ++r)
      if (used[i][r]) {
        l.rowY[i][r] = y;
        y += rowHeight + rowGap;
      }
    y += stageGap;
  }
  l.bottom = y;
  return l;
}

void writeTimeAxis(llvm::raw_ostream &os, const TimeScale &x, double bottom) {
  const double step = tickStep(x.total);
  for (double t = 0; t <= x.total * (1 + 1e-9); t += step) {
    os << fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.0f}\" x2=\"{0:.1f}\" y2=\"{2:.0f}\" stroke=\"#ddd\"/>\n",
        x(t), top - 6, bottom - stageGap);
    os << fmt::format(
        "<text x=\"{:.1f}\" y=\"{:.0f}\" text-anchor=\"middle\" fill=\"#555\">{}</text>\n", x(t),
        top - 10, timeText(t));
  }
}

void writeRowLabels(llvm::raw_ostream &os, const Plan &plan, const RowLayout &l) {
  for (size_t i = 0; i < l.rowY.size(); ++i)
    for (unsigned r = 0; r < numTimelineRows; ++r)
      if (l.rowY[i][r] >= 0)
        os << fmt::format("<text x=\"10\" y=\"{:.1f}\">{}</text>\n", l.rowY[i][r] + rowHeight - 5,
                          r == 0 ? fmt::format("stage {} (layers {}-{}) compute", i,
                                               plan.stages[i].firstLayer, plan.stages[i].lastLayer)
                                 : fmt::format("stage {} {}", i, escape(timelineRowName(r))));
}

/// One event's block, its exposed (red) tail, and its micro-batch label
/// when the block is wide enough.
void writeBlock(llvm::raw_ostream &os, const TimelineEvent &e, const TimeScale &x,
                const RowLayout &l) {
  double x0 = x(e.start), w = std::max(0.5, x(e.start + e.duration) - x0),
         top = l.rowY[e.stage][e.stream];
  os << fmt::format(
      "<rect class=\"{}\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.0f}\" "
      "fill=\"{}\" stroke=\"white\" stroke-width=\"0.5\"><title>stage {} {} {}: {} from "
      "{}</title></rect>\n",
      e.stream == 0 ? "work" : "transfer", x0, top, w, rowHeight, fillOf(e), e.stage,
      escape(timelineRowName(e.stream)), escape(e.name), timeText(e.duration), timeText(e.start));
  if (e.exposed > 0) {
    double xe = x(e.start + e.duration - e.exposed);
    os << fmt::format(
        "<rect class=\"exposed\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.0f}\" "
        "fill=\"#e15759\"><title>stage {} {}: {} waiting on transfers</title></rect>\n",
        xe, top, std::max(0.5, x(e.start + e.duration) - xe), rowHeight, e.stage, escape(e.name),
        timeText(e.exposed));
  }
  if (w >= 7.0 * e.name.size() && e.stream == 0)
    os << fmt::format(
        "<text x=\"{:.2f}\" y=\"{:.1f}\" text-anchor=\"middle\" fill=\"white\">{}</text>\n",
        x0 + w / 2, top + rowHeight - 5, escape(e.name));
}

void writeLegend(llvm::raw_ostream &os, double bottom) {
  double lx = labelWidth, ly = bottom + 10;
  for (auto [fill, label] :
       {std::pair("#4e79a7", "forward"), std::pair("#59a14f", "backward"),
        std::pair("#e15759", "exposed communication"),
        std::pair("#f28e2b", "gpu<->gpu collectives"), std::pair("#b07aa1", "host copies"),
        std::pair("#9d9d9d", "tp collectives")}) {
    os << fmt::format("<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n",
                      lx, ly, fill);
    os << fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\">{}</text>\n", lx + 16, ly + 10,
                      escape(label));
    lx += 30 + 7 * std::string(label).size();
  }
}

} // namespace

double mist::writeTimelineSvg(const Plan &plan, const PipelineEstimate &est,
                              llvm::raw_ostream &os) {
  SimulatedTimeline sim = simulateTimeline(plan, est);
  const int S = static_cast<int>(plan.stages.size());
  const TimeScale x{std::max(sim.seconds, 1e-12)};
  const RowLayout rows = layoutRows(sim, S);
  const double height = rows.bottom + legendHeight;
  const double width = labelWidth + plotWidth + 30;

  os << fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
                    "viewBox=\"0 0 {:.0f} {:.0f}\" font-family=\"sans-serif\" font-size=\"11\">\n",
                    width, height, width, height);
  os << fmt::format("<rect width=\"{:.0f}\" height=\"{:.0f}\" fill=\"white\"/>\n", width, height);
  // Two figures for one iteration, each named (docs/perf-model.md, "Pipeline").
  os << fmt::format("<text x=\"10\" y=\"20\" font-size=\"14\" font-weight=\"bold\">{}: simulated "
                    "iteration {} ({} stage{}, G = {}); the pipeline formula the tuner minimizes: "
                    "{}</text>\n",
                    escape(plan.model.empty() ? "plan" : plan.model), timeText(sim.seconds), S,
                    S == 1 ? "" : "s", plan.gradAccum, timeText(est.iterationSeconds));
  writeTimeAxis(os, x, rows.bottom);
  writeRowLabels(os, plan, rows);
  for (const TimelineEvent &e : sim.events)
    writeBlock(os, e, x, rows);
  writeLegend(os, rows.bottom);
  os << "</svg>\n";
  return sim.seconds;
}
