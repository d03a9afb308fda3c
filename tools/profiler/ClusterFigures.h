//===- ClusterFigures.h - A cluster description as the profiler writes it -===//
/// \file
/// Every field of a cluster file (schema: docs/cluster.md), as plain data:
/// what tools/profiler measures, copies from a base preset or takes from
/// its flags before ClusterYamlWriter writes it. Deliberately independent
/// of the compiler's Cluster (format/Cluster.h) and of yaml-cpp, so the
/// profiler builds on GPU hosts that have neither (MIST_RUNTIME_ONLY); the
/// unit test ProfilerYamlTest loads what the writer writes with the real
/// loader (format/ClusterLoader) to keep the two in step.
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

namespace mist::profiler {

/// A `collectives` entry: bus bandwidth of a group of nodes x gpusPerNode.
struct CollectiveFigure {
  int nodes = 1;
  int gpusPerNode = 2;
  double busGBs = 0;
  double latencyUs = 0;
};

/// An `interference` entry: stream names ("compute", "g2g", "h2d", "d2h")
/// and one slow-down factor (>= 1) per stream.
struct InterferenceFigure {
  std::vector<std::string> streams;
  std::vector<double> factors;
};

/// A `device.measured` entry.
struct MeasuredOpFigure {
  std::string op;    ///< IR op name
  std::string shape; ///< shape key, e.g. "8192x2048,2048x6144"
  double seconds = 0;
};

struct ClusterFigures {
  std::string name;
  int nodes = 1;
  int gpusPerNode = 1;
  bool tpAcrossNodes = false;

  std::string deviceName;
  double memoryGiB = 0;
  double usableFraction = 0.92;
  double peakTflops = 0;
  double tf32PeakTflops = 0; ///< 0: not given (the loader takes half of peakTflops)
  double matmulEfficiency = 0.75;
  double memBandwidthGBs = 0;
  double memEfficiency = 0.8;
  std::vector<MeasuredOpFigure> measured;

  std::vector<CollectiveFigure> collectives;
  double p2pIntraGBs = 0, p2pInterGBs = 0, p2pLatencyUs = 0;
  double h2dGBs = 0, d2hGBs = 0, hostLatencyUs = 0;
  double hostMemoryGiB = 0; ///< 0: not written (unlimited)
  std::vector<InterferenceFigure> interference;
};

} // namespace mist::profiler
