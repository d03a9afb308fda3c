//===- ClusterLinks.cpp - Collective-table lookup and p2p times -----------===//
#include "perfmodel/ClusterLinks.h"

#include <algorithm>

using namespace mist;

CollectiveFigures mist::collectiveFigures(const Cluster &c, int groupNodes, int groupGpusPerNode) {
  CollectiveFigures f;
  if (c.collectives.empty())
    return f;
  // 1 and 2: same node span, the largest gpusPerNode not above the group's.
  const CollectiveLink *best = nullptr;
  for (const CollectiveLink &l : c.collectives)
    if (l.nodes == groupNodes && l.gpusPerNode <= groupGpusPerNode &&
        (!best || l.gpusPerNode > best->gpusPerNode))
      best = &l;
  if (best)
    return {best->busGBs, best->latencyUs};

  // 3: the nearest node span not above the group's (else the smallest).
  int span = 0;
  for (const CollectiveLink &l : c.collectives)
    if (l.nodes <= groupNodes)
      span = std::max(span, l.nodes);
  if (span == 0) {
    span = c.collectives.front().nodes;
    for (const CollectiveLink &l : c.collectives)
      span = std::min(span, l.nodes);
  }
  const CollectiveLink *below = nullptr, *smallest = nullptr;
  for (const CollectiveLink &l : c.collectives) {
    if (l.nodes != span)
      continue;
    if (l.gpusPerNode <= groupGpusPerNode && (!below || l.gpusPerNode > below->gpusPerNode))
      below = &l;
    if (!smallest || l.gpusPerNode < smallest->gpusPerNode)
      smallest = &l;
  }
  const CollectiveLink &e = below ? *below : *smallest;
  f.busGBs = e.busGBs;
  if (!below)
    f.busGBs *= static_cast<double>(std::max(groupGpusPerNode, 1)) / std::max(e.gpusPerNode, 1);
  f.latencyUs = e.latencyUs;
  if (groupNodes > e.nodes)
    f.latencyUs *= static_cast<double>(groupNodes) / std::max(e.nodes, 1);
  return f;
}

double mist::collectiveBusGBs(const Cluster &c, int groupNodes, int groupGpusPerNode) {
  return collectiveFigures(c, groupNodes, groupGpusPerNode).busGBs;
}

double mist::collectiveLatencyUs(const Cluster &c, int groupNodes, int groupGpusPerNode) {
  return collectiveFigures(c, groupNodes, groupGpusPerNode).latencyUs;
}

bool mist::p2pCrossesNodes(const Cluster &c, int from, int to, int ranks) {
  const int gpn = std::max(1, c.gpusPerNode);
  for (int r = 0; r < ranks; ++r)
    if ((from + r) / gpn != (to + r) / gpn)
      return true;
  return false;
}

double mist::p2pSeconds(const Cluster &c, bool crossesNodes, double bytes) {
  double gbs = crossesNodes ? c.p2pInterGBs : c.p2pIntraGBs;
  return bytes > 0 && gbs > 0 ? bytes / (gbs * 1e9) + c.p2pLatencyUs * 1e-6 : 0;
}
