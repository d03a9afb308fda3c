//===- MetricsLog.cpp - The step metrics users plot, written to --log-dir --===//
#include "runtime/trainer/MetricsLog.h"

#include "runtime/comm/MpiCommunicator.h"
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

namespace mist::rt {

namespace {
/// A JSON number; non-finite values (a diverged loss) as null.
std::string number(double v) {
  if (!std::isfinite(v))
    return "null";
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}
/// Seconds since the epoch, to the microsecond.
std::string seconds(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6f", v);
  return text;
}
} // namespace

MetricsLog::MetricsLog(const std::string &dir, const std::string &host) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    abortJob("--log-dir: cannot create " + dir + ": " + ec.message());
  const std::string lines = dir + "/metrics.jsonl";
  jsonLines = std::fopen(lines.c_str(), "a");
  if (!jsonLines)
    abortJob("--log-dir: cannot open " + lines + ": " + std::strerror(errno));
  std::string error;
  events = std::make_unique<EventFileWriter>(dir, host, error);
  if (!events->open())
    abortJob("--log-dir: " + error);
}

MetricsLog::~MetricsLog() {
  if (jsonLines)
    std::fclose(jsonLines);
}

void MetricsLog::write(const StepRecord &r) {
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::fprintf(jsonLines,
               "{\"step\": %d, \"time\": %s, \"loss\": %s, \"grad_norm\": %s, \"lr\": %s, "
               "\"step_s\": %s, \"tokens_per_s\": %s, \"tflops_per_rank\": %s, \"mfu\": %s, "
               "\"peak_mib\": %s, \"offloaded_mib\": %s, \"predicted_step_s\": %s}\n",
               r.step, seconds(now).c_str(), number(r.loss).c_str(), number(r.gradNorm).c_str(),
               number(r.lr).c_str(), number(r.seconds).c_str(), number(r.tokensPerSecond).c_str(),
               number(r.tflopsPerRank).c_str(), r.mfu >= 0 ? number(r.mfu).c_str() : "null",
               number(r.peakMiB).c_str(), number(r.offloadedMiB).c_str(),
               r.predictedSeconds > 0 ? number(r.predictedSeconds).c_str() : "null");
  std::fflush(jsonLines);
  std::vector<std::pair<std::string, float>> scalars = {
      {"loss", float(r.loss)},
      {"grad_norm", float(r.gradNorm)},
      {"learning_rate", float(r.lr)},
      {"throughput/tokens_per_s", float(r.tokensPerSecond)},
      {"throughput/tflops_per_rank", float(r.tflopsPerRank)},
      {"time/step_s", float(r.seconds)},
      {"memory/peak_mib", float(r.peakMiB)}};
  if (r.mfu >= 0)
    scalars.push_back({"throughput/mfu", float(r.mfu)});
  if (r.offloadedMiB > 0)
    scalars.push_back({"memory/offloaded_mib", float(r.offloadedMiB)});
  if (r.predictedSeconds > 0)
    scalars.push_back({"time/predicted_step_s", float(r.predictedSeconds)});
  events->scalars(r.step, now, scalars);
}

} // namespace mist::rt
