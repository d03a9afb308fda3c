//===- Collectives.cpp - Alpha-beta collective times ----------------------===//
#include "perfmodel/Collectives.h"

#include "perfmodel/ClusterLinks.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace mist;

namespace {

/// An algorithm with a protocol: its fixed latency, its latency per step
/// inside a node and across nodes (microseconds), and the fraction of the
/// ring's bus bandwidth it moves data at. The figures are NCCL's own
/// tuning model (src/graph/tuning.cc, NCCL 2.7-2.8: baseLat and hwLat for
/// NVLink and the network, LL at a quarter of the bandwidth, tree at 0.9),
/// which NCCL uses to choose among them; they are not fitted here.
struct Variant {
  bool tree;
  double baseUs, intraStepUs, interStepUs, bandwidthShare;
};
constexpr Variant ringSimple{false, 8.4, 3.4, 9.6, 1.0};
constexpr Variant ringLowLatency{false, 3.6, 0.47, 2.7, 0.25};
constexpr Variant treeSimple{true, 0.0, 28.0, 50.0, 0.9};
constexpr Variant treeLowLatency{true, 4.4, 0.52, 5.0, 0.9 / 3.8};

double variantSeconds(const Variant &v, Collective kind, double bytes, int nodes, int gpn,
                      double busGBs) {
  const int n = nodes * gpn;
  const double passes = kind == Collective::AllReduce ? 2 : 1;
  double latencyUs;
  if (v.tree) {
    // Up and down a tree: the chain inside each node, log2(nodes) hops across.
    latencyUs = v.baseUs + 2 * ((gpn - 1) * v.intraStepUs + std::log2(nodes) * v.interStepUs);
  } else {
    const double steps = passes * (n - 1), interSteps = passes * (nodes - 1);
    latencyUs = v.baseUs + (steps - interSteps) * v.intraStepUs + interSteps * v.interStepUs;
  }
  const double perRank = passes * (n - 1) / n * bytes;
  return latencyUs * 1e-6 + perRank / (busGBs * v.bandwidthShare * 1e9);
}

/// Whether the cluster's table has an entry for exactly this group.
bool measuredGroup(const Cluster &c, int nodes, int gpusPerNode) {
  return std::any_of(c.collectives.begin(), c.collectives.end(), [&](const CollectiveLink &l) {
    return l.nodes == nodes && l.gpusPerNode == gpusPerNode;
  });
}

} // namespace

double mist::groupBusGBs(const Cluster &c, int nodes, int gpusPerNode) {
  if (measuredGroup(c, nodes, gpusPerNode) || !c.network.present())
    return collectiveFigures(c, nodes, gpusPerNode).busGBs;
  return modelBusGBs(c, nodes, gpusPerNode);
}

double mist::modelBusGBs(const Cluster &c, int nodes, int gpusPerNode) {
  const NetworkLinks &net = c.network;
  if (!net.present())
    return 0;
  double bus = net.nvlinkGBs * net.nvlinkEfficiency;
  if (nodes > 1) {
    // The group's GPUs on a node use the NICs paired with them.
    double nics = static_cast<double>(net.nicsPerNode) * gpusPerNode / std::max(1, c.gpusPerNode);
    bus = std::min(bus, nics * net.nicGBs * net.nicEfficiency);
  }
  return bus;
}

double mist::collectiveSeconds(const Cluster &c, Collective kind, double bytes, int nodes,
                               int gpusPerNode) {
  const int n = nodes * gpusPerNode;
  if (n <= 1 || bytes <= 0)
    return 0;
  const double passes = kind == Collective::AllReduce ? 2 : 1;
  if (measuredGroup(c, nodes, gpusPerNode) || !c.network.present()) {
    CollectiveFigures link = collectiveFigures(c, nodes, gpusPerNode);
    if (link.busGBs <= 0)
      return 0;
    return passes * (n - 1) / n * bytes / (link.busGBs * 1e9) + link.latencyUs * 1e-6;
  }
  const double bus = modelBusGBs(c, nodes, gpusPerNode);
  if (bus <= 0)
    return 0;
  double best = std::numeric_limits<double>::infinity();
  for (const Variant &v : {ringSimple, ringLowLatency, treeSimple, treeLowLatency}) {
    if (v.tree && (kind != Collective::AllReduce || nodes == 1))
      continue; // NCCL's trees run all-reduce, and only across nodes
    best = std::min(best, variantSeconds(v, kind, bytes, nodes, gpusPerNode, bus));
  }
  return best;
}
