//===- ClusterYamlReader.h - Read a cluster file without yaml-cpp ---------===//
/// \file
/// Reads a cluster file (docs/cluster.md) into ClusterFigures with the
/// YamlSubset reader: the profiler's `--base`, whose figures it keeps where
/// it measures nothing (node shape, collective table, p2p, host memory,
/// usable fraction, datasheet peaks). It checks what it converts (types,
/// known keys, `mist_cluster: 1`) and leaves the range checks to
/// checkClusterFigures; the compiler's loader remains the authority.
//===----------------------------------------------------------------------===//
#pragma once

#include "tools/profiler/ClusterFigures.h"

#include <string>

namespace mist::profiler {

/// Parses `text`; on failure returns false with `error` = "line N: what".
bool readClusterYaml(const std::string &text, ClusterFigures &out, std::string &error);

/// The same for a file; the error names the file.
bool readClusterYamlFile(const std::string &path, ClusterFigures &out, std::string &error);

} // namespace mist::profiler
