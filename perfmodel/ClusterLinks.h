//===- ClusterLinks.h - Collective and point-to-point times of a cluster --===//
/// \file
/// How the performance model reads a cluster's link tables: the bandwidth of
/// a collective over a group laid out on the machine, and whether and how
/// long a pipeline message between neighbouring stages travels.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Cluster.h"

namespace mist {

/// Bandwidth and latency of a collective over a group of `groupNodes` nodes
/// with `groupGpusPerNode` GPUs on each, looked up in the collective table:
///  1. an entry for exactly (groupNodes, groupGpusPerNode);
///  2. else, among entries spanning the same number of nodes, the one with
///     the largest gpusPerNode below the group's, taken as is (bandwidth
///     does not fall as a group grows inside a node, so this errs slow);
///  3. else the entries spanning the most nodes not above groupNodes (the
///     fewest nodes when all span more): among them the largest
///     gpusPerNode not above the group's, taken as is, or when all are
///     larger the smallest one with its bandwidth scaled by
///     groupGpusPerNode / entry.gpusPerNode (one link per GPU); the latency
///     is scaled by groupNodes / entry.nodes when the group spans more
///     nodes than the entry (a ring has one hop per node).
/// Both figures are 0 when the table is empty (the loader rejects a
/// multi-GPU cluster without one); a group of one GPU needs no lookup.
struct CollectiveFigures {
  double busGBs = 0;
  double latencyUs = 0;
};
CollectiveFigures collectiveFigures(const Cluster &c, int groupNodes, int groupGpusPerNode);
double collectiveBusGBs(const Cluster &c, int groupNodes, int groupGpusPerNode);
double collectiveLatencyUs(const Cluster &c, int groupNodes, int groupGpusPerNode);

/// Pipeline stages occupy consecutive GPUs in node order; rank r of a stage
/// starting at GPU `from` sends to rank r of the stage starting at `to`.
/// True when any of the first `ranks` ranks sends between nodes.
bool p2pCrossesNodes(const Cluster &c, int from, int to, int ranks);

/// Seconds to send `bytes` to the neighbouring stage (0 for no bytes).
double p2pSeconds(const Cluster &c, bool crossesNodes, double bytes);

} // namespace mist
