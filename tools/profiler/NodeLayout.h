//===- NodeLayout.h - How the MPI ranks of a profiler run sit on nodes ----===//
#pragma once

#include "runtime/comm/MpiCommunicator.h"

#include <string>

namespace mist::profiler {

/// Ranks per node from MPI_Comm_split_type(SHARED), collectively over `world`.
struct NodeLayout {
  int ranks = 1;
  int nodes = 1;
  int ranksPerNode = 1;   ///< 0 when nodes hold different numbers of ranks
  bool contiguous = true; ///< every node holds consecutive ranks (rank / ranksPerNode = node)
  int localRank = 0;      ///< this rank's index on its node
  std::string host;       ///< rank 0's host name
};

NodeLayout nodeLayout(rt::MpiCommunicator &world);

} // namespace mist::profiler
