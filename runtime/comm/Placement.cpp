//===- Placement.cpp - Do the job's hosts match the plan's mesh? ----------===//
#include "runtime/comm/Placement.h"

#include <algorithm>
#include <map>

namespace mist::rt {

namespace {

/// "0-3" or "0, 2, 5": a sorted list of ranks, runs compressed.
std::string rankList(const std::vector<int> &ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
      ++j;
    text += (text.empty() ? "" : ", ") + std::to_string(ranks[i]);
    if (j > i)
      text += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return text;
}

std::string ranksWord(const std::vector<int> &ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + rankList(ranks);
}

/// The hosts of `ranks` in order of first appearance, each with its ranks.
std::vector<std::pair<std::string, std::vector<int>>>
hostsOf(const std::vector<int> &ranks, const std::vector<std::string> &hostOfRank) {
  std::vector<std::pair<std::string, std::vector<int>>> hosts;
  for (int r : ranks) {
    const std::string &h = hostOfRank[size_t(r)];
    auto it = std::find_if(hosts.begin(), hosts.end(), [&](const auto &e) { return e.first == h; });
    if (it == hosts.end())
      hosts.push_back({h, {r}});
    else
      it->second.push_back(r);
  }
  return hosts;
}

std::string hostsText(const std::vector<std::pair<std::string, std::vector<int>>> &hosts) {
  std::string text;
  for (const auto &[host, ranks] : hosts)
    text += (text.empty() ? "" : ", ") + host + " (" + ranksWord(ranks) + ")";
  return text;
}

/// 0, 1, ..., n - 1.
std::vector<int> firstRanks(size_t n) {
  std::vector<int> ranks(n);
  for (size_t r = 0; r < n; ++r)
    ranks[r] = int(r);
  return ranks;
}

std::vector<int> stageRanks(const RankLayout &layout, int stage) {
  std::vector<int> ranks;
  for (int r = 0; r < layout.stages[size_t(stage)].ranks; ++r)
    ranks.push_back(layout.stageStarts[size_t(stage)] + r);
  return ranks;
}

} // namespace

std::string describeHosts(const std::vector<std::string> &hostOfRank,
                          const std::vector<int> &ranks) {
  return hostsText(hostsOf(ranks.empty() ? firstRanks(hostOfRank.size()) : ranks, hostOfRank));
}

std::vector<PlacementFinding> checkPlacement(const RankLayout &layout,
                                             const std::vector<StageMesh> &meshes,
                                             const PlannedCluster &cluster,
                                             const std::vector<std::string> &hostOfRank,
                                             const Launcher &launcher) {
  std::vector<PlacementFinding> findings;
  const auto hosts = hostsOf(firstRanks(hostOfRank.size()), hostOfRank);
  if (hosts.size() <= 1)
    return findings;
  const int perHost = std::max(1, cluster.gpusPerNode);
  const std::string fix = "place consecutive ranks on one host: " + launcher.packOption(perHost);

  for (int s = 0; s < int(layout.stages.size()); ++s) {
    const StageShape &shape = layout.stages[size_t(s)];
    const std::string stageName = "stage " + std::to_string(s);
    // tp groups: consecutive ranks, tp innermost (RankLayout).
    int splitGroups = 0;
    std::string firstSplit;
    if (shape.tp > 1 && !cluster.tpAcrossNodes)
      for (int d = 0; d < shape.dp; ++d) {
        std::vector<int> group;
        for (int t = 0; t < shape.tp; ++t)
          group.push_back(layout.worldRank(s, d, t));
        const auto groupHosts = hostsOf(group, hostOfRank);
        if (groupHosts.size() > 1 && splitGroups++ == 0)
          firstSplit = hostsText(groupHosts);
      }
    if (splitGroups > 0) {
      findings.push_back(
          {true, stageName + ": " + std::to_string(splitGroups) + " of its " +
                     std::to_string(shape.dp) + " tp group" + (shape.dp == 1 ? "" : "s") +
                     " span hosts (the first on " + firstSplit + "); the plan keeps a tp group " +
                     "inside one node of the " + cluster.name +
                     " cluster, and split like this every layer's all-reduces cross the "
                     "network; " +
                     fix});
      continue;
    }
    const StageMesh mesh = s < int(meshes.size()) ? meshes[size_t(s)] : StageMesh{};
    const auto stageHosts = hostsOf(stageRanks(layout, s), hostOfRank);
    if (int(stageHosts.size()) > mesh.nodes)
      findings.push_back(
          {false, stageName + " (a mesh of " + std::to_string(mesh.nodes) + " node" +
                      (mesh.nodes == 1 ? "" : "s") + " x " + std::to_string(mesh.gpusPerNode) +
                      " GPUs) runs on " + std::to_string(stageHosts.size()) + " hosts, " +
                      hostsText(stageHosts) +
                      ": correct, but its dp collectives cross the network more than the plan "
                      "priced, so steps take longer than predicted; " +
                      fix});
  }
  for (const auto &[host, ranks] : hosts)
    if (int(ranks.size()) > perHost)
      findings.push_back({false,
                          "host " + host + " runs " + std::to_string(ranks.size()) + " ranks (" +
                              rankList(ranks) + "), and a node of the " + cluster.name +
                              " cluster has " + std::to_string(perHost) +
                              " GPUs: on GPUs ranks would share devices; " + fix,
                          /*sharesGpus=*/true});
  return findings;
}

} // namespace mist::rt
