//===- ClusterWriter.h - Write a cluster file without yaml-cpp ------------===//
/// \file
/// Writes a Cluster (format/Cluster.h) in the schema yaml/ClusterLoader
/// reads (docs/cluster.md), in the presets' layout: top-level keys in
/// schema order, `device` as a block mapping, table entries as one-line
/// flow mappings, numbers in their shortest round-trip form (plain scalars,
/// as the loader wants them), strings plain when YAML reads them back as
/// the same string and double-quoted otherwise. Standard C++ only, so the
/// profiler writes its files with it on hosts without yaml-cpp
/// (MIST_RUNTIME_ONLY); tests/unit/ProfilerYamlTest loads what it writes
/// with the real loader to keep the two in step.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Cluster.h"

#include <ostream>
#include <string>
#include <vector>

namespace mist {

/// What the loader would reject in `c` (required figures missing or out of
/// range, a collective table that does not cover the node shape, bad
/// interference entries, duplicate measured entries), one message each;
/// empty when the file will load.
std::vector<std::string> checkCluster(const Cluster &c);

/// `comment` lines first (each prefixed with "# "), then the cluster.
void writeClusterYaml(const Cluster &c, const std::vector<std::string> &comment, std::ostream &os);

/// The shortest decimal text that reads back as exactly `v`.
std::string yamlNumber(double v);
/// `s` as a YAML scalar: plain when that reads back as the same string,
/// else double-quoted with escapes.
std::string yamlString(const std::string &s);

} // namespace mist
