//===- Placement.h - Do the job's hosts match the plan's mesh? ------------===//
/// \file
/// A plan puts each stage on a mesh of nodes x GPUs per node and keeps a tp
/// group inside one node (unless the cluster says tp may span nodes): the
/// performance model priced its all-reduces on NVLink. Which host a rank
/// runs on is the launcher's choice (`--map-by`, `--distribution`), so the
/// trainer compares the two at start, before a step is taken: a tp group
/// split over hosts is refused (it would run, with every layer's
/// all-reduces on the network), a stage spread over more hosts than its mesh
/// has nodes, or a host running more ranks than a node has GPUs, is a
/// warning (correct, slower than predicted). On one host there is nothing
/// to compare: several nodes rehearsed on one machine cross no network.
/// Pure: the caller gathers the hosts (MpiCommunicator::allGatherText).
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/comm/Launcher.h"
#include "runtime/comm/RankLayout.h"
#include <string>
#include <vector>

namespace mist::rt {

/// Where the plan put a stage.
struct StageMesh {
  int nodes = 1, gpusPerNode = 1;
};

/// What the plan assumed of the cluster.
struct PlannedCluster {
  std::string name; ///< the preset or file the plan was tuned for
  int gpusPerNode = 1;
  bool tpAcrossNodes = false; ///< a tp group may span nodes
};

struct PlacementFinding {
  bool refuses = false; ///< the job must not run like this (a warning otherwise)
  std::string text;
  /// More ranks on a host than its node has GPUs: ranks would share a GPU,
  /// which the trainer refuses on GPUs (on CPU ranks cores are the devices).
  bool sharesGpus = false;
};

/// The findings for a job whose world rank r runs on `hostOfRank[r]`, in
/// the order they should be shown; empty when the placement matches.
/// `meshes` has one entry per stage of `layout`.
std::vector<PlacementFinding> checkPlacement(const RankLayout &layout,
                                             const std::vector<StageMesh> &meshes,
                                             const PlannedCluster &cluster,
                                             const std::vector<std::string> &hostOfRank,
                                             const Launcher &launcher);

/// "a (ranks 0-3), b (ranks 4-7)": which of `ranks` (all when empty) run on
/// each host, hosts in the order of their first rank.
std::string describeHosts(const std::vector<std::string> &hostOfRank,
                          const std::vector<int> &ranks = {});

} // namespace mist::rt
