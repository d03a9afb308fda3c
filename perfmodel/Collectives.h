//===- Collectives.h - Time of an NCCL-style collective on a cluster ------===//
/// \file
/// The alpha-beta model of a collective over a group laid out as `nodes`
/// x `gpusPerNode` GPUs (docs/perf-model.md, "Collectives"):
///  - bandwidth (beta): a ring's bus bandwidth is that of its slowest link:
///    NVLink inside a node, and across nodes the NICs the group's GPUs on a
///    node own (nics_per_node * gpusPerNode / the node's GPUs);
///  - latency (alpha): a fixed cost per algorithm plus one per step, each
///    step inside a node or across nodes;
///  - the algorithm and protocol are those of least time for the size, as
///    NCCL picks them: ring or (all-reduce across nodes) tree, each with the
///    bandwidth protocol (Simple) or the low-latency one (LL).
/// A measured `collectives` entry for exactly this group wins over the
/// model; a cluster without `network` uses its table (ClusterLinks.h).
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Cluster.h"

namespace mist {

enum class Collective { AllReduce, AllGather, ReduceScatter };

/// Seconds to run `kind` on a buffer of `bytes` (the all-reduced buffer,
/// the gathered result, the buffer before reduce-scatter) over the group.
double collectiveSeconds(const Cluster &c, Collective kind, double bytes, int nodes,
                         int gpusPerNode);

/// The bus bandwidth a group's large collectives run at, GB/s: a measured
/// entry for exactly this group, else the network model, else the table's
/// lookup (ClusterLinks.h).
double groupBusGBs(const Cluster &c, int nodes, int gpusPerNode);

/// The network model's ring bus bandwidth for the group, GB/s (nccl-tests'
/// busbw at large sizes); 0 without a `network` section.
double modelBusGBs(const Cluster &c, int nodes, int gpusPerNode);

} // namespace mist
