//===- NcclProbe.h - Collective and point-to-point bandwidth over NCCL ----===//
/// \file
/// With one MPI rank per GPU (runtime/comm/NcclCommunicator, library
/// mistrtCommNccl), measures the collective table's entries and the p2p
/// links, each time the median over repetitions of the slowest rank:
///  - all-gather bus bandwidth (nccl-tests' busbw: (n-1)/n x gathered bytes
///    / time) of 1 GiB gathered, and the time of a 4-byte-per-rank
///    all-gather as the latency, for groups of 2, 4, ... consecutive GPUs of
///    a node (all such groups at once, as dp/tp groups run), for all the
///    ranks, and across nodes for one GPU per node;
///  - send/recv of 256 MiB (and 4 bytes: the latency) between ranks 0 and 1
///    of a node, and between the first ranks of two nodes.
/// Collective over the world; every rank gets the figures.
//===----------------------------------------------------------------------===//
#pragma once

#include "tools/profiler/ClusterFigures.h"
#include "tools/profiler/NodeLayout.h"

#include <string>
#include <vector>

namespace mist::profiler {

struct NcclFigures {
  std::vector<CollectiveFigure> collectives;
  double p2pIntraGBs = 0, p2pInterGBs = 0;
  double p2pLatencyUs = -1; ///< -1: not measured
  std::string how;
};

NcclFigures measureNccl(rt::MpiCommunicator &world, const NodeLayout &layout, int warmup,
                        int repeats);

} // namespace mist::profiler
