//===- ClusterReader.h - The one reader of cluster files ------------------===//
/// \file
/// Reads a cluster file (schema in docs/cluster.md) into a Cluster, checking
/// every key: required keys, types, ranges, stream names, measured entries,
/// interference entries, the collective table against the node shape. Each
/// problem is reported at its line and column, all of them in one pass.
/// Standard C++ only (format/YamlSubset underneath), so the compiler
/// (yaml/ClusterLoader.h, which turns problems into located diagnostics and
/// finds presets by name) and the profiler's `--base` on hosts without
/// yaml-cpp read cluster files with the same code.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Cluster.h"
#include "format/YamlSubset.h"

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mist {

/// The cluster-file version this reader reads (`mist_cluster: 1`).
constexpr int clusterFormatVersion = 1;

struct ClusterReadOptions {
  /// `--nodes N`: replaces the file's node count before the checks that
  /// depend on it (0 keeps the file's). The collective table keeps its
  /// meaning: entries describe groups by their own node span.
  int nodesOverride = 0;
  /// Whether a `measured` entry's op names an op of the IR; the reader
  /// lives below the IR, so the caller says (ir/Ops.def).
  std::function<bool(std::string_view)> knownOp;
};

/// Parses `text`; nullopt with every problem in `problems` otherwise.
std::optional<Cluster> readCluster(const std::string &text, const ClusterReadOptions &options,
                                   std::vector<TextProblem> &problems);

/// The same for a file; `error` is "path:line:column: message" for the
/// first problem (and a count of the others).
bool readClusterFile(const std::string &path, const ClusterReadOptions &options, Cluster &out,
                     std::string &error);

} // namespace mist
