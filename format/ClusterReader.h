//===- ClusterReader.h - Read a cluster file without yaml-cpp -------------===//
/// \file
/// Reads a cluster file (docs/cluster.md) into a Cluster with the
/// YamlSubset reader, in standard C++ only: the profiler's `--base` on
/// hosts without yaml-cpp (MIST_RUNTIME_ONLY), whose figures it keeps where
/// it measures nothing. It checks what it converts (types, known keys,
/// stream names, `mist_cluster: 1`) and leaves the range checks to
/// checkCluster (format/ClusterWriter.h); the compiler's located loader
/// (yaml/ClusterLoader.h) remains the authority.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Cluster.h"

#include <string>

namespace mist {

/// Parses `text`; on failure returns false with `error` = "line N: what".
bool readClusterYaml(const std::string &text, Cluster &out, std::string &error);

/// The same for a file; the error names the file.
bool readClusterYamlFile(const std::string &path, Cluster &out, std::string &error);

} // namespace mist
