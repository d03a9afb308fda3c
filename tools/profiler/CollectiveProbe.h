//===- CollectiveProbe.h - Collective and point-to-point bandwidth --------===//
/// \file
/// With one MPI rank per device, measures the collective table's entries and
/// the p2p links over a communicator (NCCL on GPUs: NcclProbe; MPI itself on
/// CPU ranks: mist-profile-cpu), each time the median over repetitions of
/// the slowest rank:
///  - all-gather bus bandwidth (nccl-tests' busbw: (n-1)/n x gathered bytes
///    / time) and the time of a 4-byte-per-rank all-gather as the latency,
///    for groups of 2, 4, ... consecutive ranks of a node (all such groups
///    at once, as dp/tp groups run), for all the ranks, and across nodes for
///    one rank per node;
///  - send/recv (and 4 bytes: the latency) between ranks 0 and 1 of a node,
///    and between the first ranks of two nodes.
/// Collective over `world`; every rank gets the figures.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Cluster.h"
#include "runtime/comm/Communicator.h"
#include "tools/profiler/NodeLayout.h"

#include <string>
#include <vector>

namespace mist::profiler {

struct LinkFigures {
  std::vector<CollectiveLink> collectives;
  double p2pIntraGBs = 0, p2pInterGBs = 0;
  double p2pLatencyUs = -1; ///< -1: not measured
  std::string how;
};

/// What to move: `in` and `out` hold `gatheredBytes` each, in the memory
/// `comm` works on; `p2pBytes` (at most `gatheredBytes`) go point to point.
struct ProbeBuffers {
  float *in = nullptr, *out = nullptr;
  size_t gatheredBytes = 0, p2pBytes = 0;
};

/// `comm` spans the same ranks as `world` (which gives barriers and the
/// slowest rank); `how` names the transport for the figures' source line.
LinkFigures measureLinks(rt::MpiCommunicator &world, rt::Communicator &comm,
                         const NodeLayout &layout, const ProbeBuffers &buffers, int warmup,
                         int repeats, const std::string &how);

} // namespace mist::profiler
