//===- Interference.h - How concurrent streams slow each other down -------===//
/// \file
/// The interference table of a cluster file (docs/cluster.md, "Interference
/// model"): for every set A of 2 to 4 of the four streams, the factor by
/// which each stream of A runs slower while exactly A is busy. Workloads,
/// one per stream and each on its own CUDA stream:
///
///   compute  a bf16 GEMM (Bf16Gemm, 8192^3 by default)
///   g2g      a device-to-device copy (256 MiB): a stand-in for NCCL
///            traffic on one GPU, which reads and writes device memory too
///            (NCCL also uses SMs and NVLink, which this does not load)
///   h2d      a pinned host-to-device copy (256 MiB)
///   d2h      a pinned device-to-host copy (256 MiB)
///
/// Each unit's time alone is the median of N runs. For a set, every stream
/// repeats its unit for about `targetMs` behind a gate kernel that lets
/// them start together, with an event after every unit; only units that
/// lie wholly inside the window where all streams of the set are busy
/// count. factor = (their mean time) / (time alone), at least 1.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Cluster.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mist::profiler {

struct InterferenceOptions {
  int warmup = 3, repeats = 20;
  double targetMs = 200;   ///< how long each set runs
  int64_t gemmSize = 8192; ///< m = k = n of the compute GEMM
  size_t copyBytes = 256 << 20;
};

struct InterferenceResult {
  std::vector<InterferenceEntry> table; ///< 11 entries, pairs first
  double aloneSeconds[4] = {};          ///< compute, g2g, h2d, d2h
  std::string how;                      ///< one line for the file's header
};

InterferenceResult measureInterference(const InterferenceOptions &opts);

} // namespace mist::profiler
