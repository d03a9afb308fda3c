//===- Measurements.h - What one profiler run measured --------------------===//
/// \file
/// The raw results of a mist-profile run, before ClusterAssembly combines
/// them with the base file and the flags. A figure that was not measured
/// keeps its "absent" value (0, empty), so the assembly can fall back.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Cluster.h"

#include <string>
#include <vector>

namespace mist::profiler {

/// An entry of the shapes file that was not timed, and why.
struct NotTimedOp {
  std::string op, shape, why;
};

struct Measurements {
  // How and where.
  std::string tool = "mist-profile"; ///< which profiler measured (mist-profile-cpu on a CPU)
  std::string timer = "CUDA events"; ///< what timed each run
  std::string when;                  ///< UTC, ISO 8601
  std::string host;                  ///< hostname of rank 0
  std::string software;              ///< e.g. "CUDA runtime 13.0, driver 13.0"
  int ranks = 1;                     ///< MPI ranks (one GPU each)
  int nodes = 1;                     ///< distinct hosts among them
  int ranksPerNode = 1;              ///< 0 when nodes hold different numbers of ranks
  int repeats = 0, warmup = 0;

  // The device (rank 0's).
  std::string deviceName;
  std::string deviceNameWhat = "the name the driver reports";
  double memoryGiB = 0;
  std::string memoryWhat = "total device memory the driver reports";
  /// A base file's memory_gib wins over memoryGiB (the CPU profiler: host
  /// memory is shared, so a base's chosen share, e.g. its --memory-gib, stays).
  bool baseMemoryFirst = false;
  double gemmTflops = 0;                      ///< the large GEMM's achieved rate
  std::string gemmShape;                      ///< e.g. "8192x8192x8192"
  std::string gemmKind = "bf16";              ///< its element type
  std::string gemmCall = "linearFwdBf16Cuda"; ///< what ran it
  double d2dGBs = 0;   ///< device-to-device copy, read + write bytes per second / 1e9
  std::string d2dWhat; ///< e.g. "1 GiB"

  // Pinned host memory, per GPU while every rank copies at once (the slowest).
  double h2dGBs = 0, d2hGBs = 0, hostLatencyUs = 0;
  std::string hostWhat;
  std::string hostLatencyWhat = "pinned copies of 8 bytes, both directions averaged";
  std::string copyWhat = "device-to-device copy"; ///< what d2dGBs copied within

  // Measured op times; the entries of the shapes file that were not timed.
  std::vector<MeasuredOp> ops;
  std::vector<NotTimedOp> notTimed;
  int opsListed = 0;  ///< entries in the shapes file
  std::string opsHow; ///< e.g. "linear_grad as two bf16 GEMMs"

  std::vector<InterferenceEntry> interference;
  std::string interferenceHow;

  // NCCL (with 2+ ranks).
  std::vector<CollectiveLink> collectives;
  std::string collectivesHow;
  double p2pIntraGBs = 0, p2pInterGBs = 0, p2pLatencyUs = -1; ///< latency -1: not measured
  std::string ncclSkipped; ///< why collectives were not measured, when they were not
  std::string p2pHow = "NCCL send/recv of 256 MiB", p2pLatencyHow = "NCCL send/recv of 4 bytes";
};

} // namespace mist::profiler
