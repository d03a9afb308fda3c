//===- MetricsLog.h - The step metrics users plot, written to --log-dir ----===//
/// \file
/// With `--log-dir DIR` (or Megatron-LM's name, `--tensorboard-dir`), rank 0
/// (which holds the loss) writes every step's figures twice: a line of
/// DIR/metrics.jsonl (JSON, one object per step, appended across resumed
/// runs) and a TensorBoard event file (EventFileWriter.h), so
/// `tensorboard --logdir DIR` and scripts/plot-run.py draw the curves.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/trainer/EventFileWriter.h"

#include <cstdio>
#include <memory>
#include <string>

namespace mist::rt {

/// What one step's log line says.
struct StepRecord {
  int step = 0;
  double loss = 0, gradNorm = 0, lr = 0;
  double seconds = 0; ///< the step's wall time
  double tokensPerSecond = 0;
  double tflopsPerRank = 0; ///< model FLOP/s per rank, in TFLOP/s
  double mfu = -1;          ///< of the planned device's peak; < 0: not on that device
  double peakMiB = 0, offloadedMiB = 0;
  double predictedSeconds = 0; ///< the plan's predicted iteration; 0: none
};

class MetricsLog {
public:
  /// Creates `dir` when needed and opens both files; a failure ends the job
  /// with a message naming the file.
  MetricsLog(const std::string &dir, const std::string &host);
  ~MetricsLog();
  MetricsLog(const MetricsLog &) = delete;
  MetricsLog &operator=(const MetricsLog &) = delete;

  void write(const StepRecord &r);

private:
  std::FILE *jsonLines = nullptr;
  std::unique_ptr<EventFileWriter> events;
};

} // namespace mist::rt
