//===- ChromeTrace.h - Timelines in the Chrome / Perfetto trace format ----===//
/// \file
/// The predicted timeline (`mistc --emit=timeline`) and the trainer's
/// measured one (`train --trace`) are written by this one writer, so the two
/// open side by side in ui.perfetto.dev with the same rows: one process per
/// pipeline stage, one thread per stream, one complete event per piece of
/// work.
//===----------------------------------------------------------------------===//
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace mist {

class ChromeTraceWriter {
public:
  /// Writes the header; `finish` closes the document.
  explicit ChromeTraceWriter(std::ostream &os);
  void processName(int pid, const std::string &name);
  void threadName(int pid, int tid, const std::string &name);
  /// A complete ("X") event; times in seconds, written in microseconds.
  void complete(const std::string &name, int pid, int tid, double startSeconds,
                double durationSeconds);
  /// Closes the event list and writes `otherData` (numbers, 6 significant
  /// digits) when there is any.
  void finish(const std::vector<std::pair<std::string, double>> &otherData = {});

private:
  void event(const std::string &json);
  std::ostream &os;
  bool first = true;
};

/// `text` as a JSON string literal, quotes included.
std::string jsonQuoted(const std::string &text);

} // namespace mist
