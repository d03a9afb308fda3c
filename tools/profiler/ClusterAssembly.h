//===- ClusterAssembly.h - Measurements + base + flags -> a cluster file --===//
/// \file
/// Combines a profiler run's Measurements with the `--base` cluster (if
/// any) and the flags into the Cluster to write, and the header
/// comment saying where every figure came from: M measured by this run, B
/// copied from the base file, F given as a flag, D mist-profile's default.
/// Precedence: a flag beats a measurement (to correct it) only for the
/// figures that are not measured directly (peaks, shape, links the run did
/// not see); measured figures beat the base.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Cluster.h"
#include "tools/profiler/Measurements.h"
#include "tools/profiler/ProfilerOptions.h"

#include <optional>
#include <string>
#include <vector>

namespace mist::profiler {

struct AssembledCluster {
  Cluster figures;
  std::vector<std::string> comment; ///< the header, one line each
  std::vector<std::string> warnings;
};

/// On failure (the result would not load, e.g. a node of several GPUs and
/// no collective figures) returns false with `error`.
bool assembleCluster(const Measurements &m, const std::optional<Cluster> &base,
                     const ProfilerOptions &opts, AssembledCluster &out, std::string &error);

/// Checks, before any measurement, that the run can produce a file that
/// loads: the node shape the flags, base and ranks give must be covered by
/// collective figures. `ranks`, `nodes`, `ranksPerNode` as in Measurements.
bool checkAssemblyInputs(const std::optional<Cluster> &base, const ProfilerOptions &opts, int ranks,
                         int nodes, int ranksPerNode, bool ncclAvailable, std::string &error);

} // namespace mist::profiler
