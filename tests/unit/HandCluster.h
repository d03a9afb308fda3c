//===- HandCluster.h - A cluster whose figures make costs hand-computable -===//
/// One node of 8 GPUs at 100 TFLOP/s and 1000 GB/s, every efficiency 1, a
/// 100 GB/s collective table for groups of 2, 4 and 8, 10 GB/s host links
/// and 50 GB/s p2p, no interference: the time and memory model tests
/// compute their expected values from these.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Cluster.h"

namespace mist::test {

inline Cluster handCluster() {
  Cluster c;
  c.name = "hand";
  c.nodes = 1;
  c.gpusPerNode = 8;
  c.device.memoryGiB = 80;
  c.device.usableFraction = 1.0;
  c.device.peakTflops = 100;
  c.device.matmulEfficiency = 1;
  c.device.memBandwidthGBs = 1000;
  c.device.memEfficiency = 1;
  c.collectives = {{1, 8, 100, 0}, {1, 4, 100, 0}, {1, 2, 100, 0}};
  c.h2dGBs = c.d2hGBs = 10;
  c.p2pIntraGBs = c.p2pInterGBs = 50;
  return c;
}

} // namespace mist::test
