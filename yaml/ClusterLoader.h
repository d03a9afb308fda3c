//===- ClusterLoader.h - Read a cluster description -----------------------===//
/// \file
/// The compiler's door to cluster files: finds a preset by name
/// (stdlib/clusters/<name>.yaml) or a file by path, reads it with the one
/// cluster-file reader (format/ClusterReader.h), whose problems become
/// located diagnostics, and checks `measured` op names against the IR's.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Cluster.h"
#include "format/ClusterReader.h"
#include "support/Diagnostics.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include <optional>
#include <string>

namespace mist {

/// Parses buffer `bufferId` of diag.sourceMgr(). `nodesOverride` > 0
/// replaces the file's node count before the checks that depend on it; the
/// collective table keeps its meaning (entries describe groups by their own
/// node span). Returns nullopt after reporting errors.
std::optional<Cluster> loadCluster(unsigned bufferId, DiagnosticEngine &diag,
                                   int nodesOverride = 0);

/// Loads a cluster file by path, or a preset by name: `a100-40g` is
/// `<dir>/a100-40g.yaml` for the first of `presetDirs` that has it. An
/// argument with a '/' or a .yaml/.yml suffix, or naming an existing file,
/// is a path. `nodesOverride` is `--nodes N` (0 keeps the file's value).
std::optional<Cluster> loadClusterByName(llvm::StringRef nameOrPath, int nodesOverride,
                                         llvm::ArrayRef<std::string> presetDirs,
                                         DiagnosticEngine &diag);

/// The preset names found in `presetDirs`, sorted.
std::vector<std::string> listClusterPresets(llvm::ArrayRef<std::string> presetDirs);

} // namespace mist
