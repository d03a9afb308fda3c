//===- NodeLayout.cpp - How the MPI ranks of a profiler run sit on nodes --===//
#include "tools/profiler/NodeLayout.h"

#include <mpi.h>

namespace mist::profiler {

NodeLayout nodeLayout(rt::MpiCommunicator &world) {
  NodeLayout l;
  l.ranks = world.size();
  MPI_Comm node = MPI_COMM_NULL;
  int localSize = 1;
  if (MPI_Comm_split_type(world.handle(), MPI_COMM_TYPE_SHARED, world.rank(), MPI_INFO_NULL,
                          &node) != MPI_SUCCESS ||
      MPI_Comm_rank(node, &l.localRank) != MPI_SUCCESS ||
      MPI_Comm_size(node, &localSize) != MPI_SUCCESS || MPI_Comm_free(&node) != MPI_SUCCESS)
    rt::abortJob("mist-profile: cannot find the ranks of this node (MPI_Comm_split_type)");
  l.nodes = static_cast<int>(world.allReduceSumDouble(l.localRank == 0 ? 1 : 0));
  const int most = static_cast<int>(world.allReduceMax(localSize));
  const int least = static_cast<int>(-world.allReduceMax(-localSize));
  l.ranksPerNode = most == least ? most : 0;
  const bool mine = l.ranksPerNode > 0 && world.rank() % l.ranksPerNode == l.localRank;
  l.contiguous = -world.allReduceMax(mine ? -1 : 0) == 1;
  char name[MPI_MAX_PROCESSOR_NAME + 1] = {};
  int length = 0;
  MPI_Get_processor_name(name, &length);
  l.host = name;
  return l;
}

} // namespace mist::profiler
