//===- HostCluster.h - The `host` preset fitted to this machine -----------===//
/// \file
/// stdlib/clusters/host.yaml describes one CPU core's rates; loading the
/// preset by its name fits its shape to the machine mistc runs on: one node
/// of as many "devices" as the cores this process may use, each with the
/// physical memory over them, and the one-node collective entry over all of
/// them. It is what mistc plans for when no cluster is named.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Cluster.h"

namespace mist {

/// The preset's name.
inline constexpr const char *hostClusterName = "host";

/// Fits a loaded `host` preset to this machine (see above).
void fitHostCluster(Cluster &c);

} // namespace mist
