//===- ProcessGroups.cpp - A rank's tp, dp and pipeline communicators -----===//
#include "runtime/comm/ProcessGroups.h"

#include <stdexcept>

namespace mist::rt {

ProcessGroups::ProcessGroups(Communicator &world, const RankLayout &layout)
    : rankLayout(layout), world(world) {
  if (world.size() != layout.worldSize || world.rank() != layout.myWorldRank)
    throw std::invalid_argument(
        "ProcessGroups: the layout is for rank " + std::to_string(layout.myWorldRank) + " of " +
        std::to_string(layout.worldSize) + ", but this is rank " + std::to_string(world.rank()) +
        " of " + std::to_string(world.size()));
  // A group's color is the world rank of its first member: unique across
  // stages and groups, and never negative, so every rank gets a group.
  tpGroup = world.split(layout.worldRank(layout.stage, layout.dpRank, 0), layout.tpRank);
  dpGroup = world.split(layout.worldRank(layout.stage, 0, layout.tpRank), layout.dpRank);
}

} // namespace mist::rt
