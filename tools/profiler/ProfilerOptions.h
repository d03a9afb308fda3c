//===- ProfilerOptions.h - mist-profile's command line --------------------===//
/// \file
/// The flags of mist-profile (docs/cluster.md, "Profiling a cluster"). The
/// figures a profiler cannot measure (datasheet peaks, the node shape, the
/// collective table beyond the ranks it runs on, links between nodes, host
/// memory) come from `--base PRESET.yaml` and are overridden by the flags
/// below when given; what came from where is written into the output's
/// header comment.
//===----------------------------------------------------------------------===//
#pragma once

#include "tools/profiler/OpTimerMode.h"

#include <optional>
#include <set>
#include <string>

namespace mist::profiler {

struct ProfilerOptions {
  std::string out;        ///< --out: the cluster YAML to write (required)
  std::string name;       ///< --name (default: the base's name + "-measured", else "measured")
  std::string shapesPath; ///< --shapes: from mistc --emit=profile-shapes
  std::string basePath;   ///< --base: a cluster file to start from
  int repeats = 20;       ///< --repeats: measured runs per figure (the median counts)
  int warmup = 3;         ///< --warmup: unmeasured runs before them
  LinearGradMode linearGrad = LinearGradMode::Bf16Gemms; ///< --linear-grad
  /// --dtype (mist-profile-cpu): the trainer's weights and activations, f32
  /// or bf16; statistics, the loss and weight gradients stay fp32.
  std::string dtype = "f32";
  bool dtypeGiven = false;       ///< --dtype was on the command line (else the shapes file's)
  std::set<std::string> skipOps; ///< --skip-ops a,b: left to the roofline
  bool interference = true;      ///< --no-interference skips it
  double interferenceMs = 200;   ///< --interference-ms: how long each set of streams runs
  /// --overlap (mist-profile-cpu): measure the interference of the streams
  /// on threads, as the trainer's --overlap runs them (else: one stream).
  bool overlap = false;

  // Figures no measurement gives (override --base).
  std::optional<double> peakTflops;     ///< --peak-tflops: datasheet dense bf16 peak
  std::optional<double> peakMemGBs;     ///< --peak-mem-gbs: datasheet memory bandwidth
  std::optional<double> memoryGiB;      ///< --memory-gib (default: what the driver reports)
  std::optional<double> usableFraction; ///< --usable-fraction
  std::optional<int> nodes;             ///< --nodes
  std::optional<int> gpusPerNode;       ///< --gpus-per-node
  std::optional<double> p2pIntraGBs, p2pInterGBs, p2pLatencyUs; ///< --p2p-*
  std::optional<double> hostMemoryGiB;                          ///< --host-memory-gib
};

/// Parses argv[1..]; on failure returns false with `error`. `help` is set
/// for --help / -h (the caller prints profilerUsage()).
bool parseProfilerOptions(int argc, char **argv, ProfilerOptions &opts, bool &help,
                          std::string &error);

/// The --help text.
const char *profilerUsage();

} // namespace mist::profiler
