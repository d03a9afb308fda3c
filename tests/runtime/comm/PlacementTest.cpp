//===- PlacementTest.cpp - The job's hosts against the plan's mesh --------===//
/// Which placements are refused, which warned about, and that messages speak
/// the launcher found in the environment.
//===----------------------------------------------------------------------===//
#include "runtime/comm/Placement.h"
#include "runtime/comm/Launcher.h"

#include <gtest/gtest.h>
#include <map>

using namespace mist::rt;

namespace {

Launcher launcherOf(std::map<std::string, std::string> env) {
  return detectLauncher([env](const char *name) -> const char * {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

RankLayout layoutOf(const std::vector<StageShape> &stages) {
  int worldSize = 0;
  for (const StageShape &s : stages)
    worldSize += s.ranks;
  std::string error;
  auto layout = RankLayout::build(stages, worldSize, 0, error);
  EXPECT_TRUE(layout) << error;
  return *layout;
}

const PlannedCluster dgx{"a100-80g", 8, false};
const Launcher openMpi{LauncherKind::OpenMpi};

} // namespace

TEST(Launcher, RecognisedFromTheEnvironment) {
  EXPECT_EQ(
      launcherOf(
          {{"OMPI_MCA_orte_hnp_uri", "1;tcp://x"}, {"SLURM_STEP_ID", "0"}, {"SLURM_PROCID", "0"}})
          .kind,
      LauncherKind::OpenMpi); // mpirun inside an sbatch allocation
  EXPECT_EQ(launcherOf({{"SLURM_STEP_ID", "3"}, {"SLURM_PROCID", "1"}}).kind, LauncherKind::Slurm);
  EXPECT_EQ(launcherOf({{"OMPI_COMM_WORLD_SIZE", "2"}}).kind, LauncherKind::OpenMpi);
  EXPECT_EQ(launcherOf({{"PMI_RANK", "0"}}).kind, LauncherKind::Hydra);
  EXPECT_EQ(launcherOf({{"SLURM_JOB_ID", "7"}}).kind, LauncherKind::Unknown); // sbatch, no srun
  EXPECT_EQ(launcherOf({}).kind, LauncherKind::Unknown);
}

TEST(Launcher, AdviceSpeaksTheLauncher) {
  EXPECT_EQ(Launcher{LauncherKind::Slurm}.launchCommand(4), "srun -n 4 --mpi=pmix ./train");
  EXPECT_EQ(openMpi.launchCommand(2), "mpirun -np 2 ./train");
  const std::string unknown = Launcher{}.launchCommand(2);
  EXPECT_NE(unknown.find("launch 2 ranks"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("srun -n 2 --mpi=pmix"), std::string::npos) << unknown;
  EXPECT_NE(Launcher{LauncherKind::Slurm}.packOption(8).find("--distribution=block"),
            std::string::npos);
  EXPECT_NE(openMpi.packOption(8).find("--map-by ppr:8:node"), std::string::npos);
}

TEST(Placement, OneHostHasNothingToCompare) {
  // Two nodes' worth of ranks rehearsed on one machine cross no network.
  const RankLayout layout = layoutOf({{16, 8, 2}});
  EXPECT_TRUE(
      checkPlacement(layout, {{2, 8}}, dgx, std::vector<std::string>(16, "h"), openMpi).empty());
}

TEST(Placement, PackedRanksMatchTheMesh) {
  // 2 nodes x 8 GPUs, tp 4 dp 4: ranks 0-7 on a, 8-15 on b.
  std::vector<std::string> hosts;
  for (int r = 0; r < 16; ++r)
    hosts.push_back(r < 8 ? "a" : "b");
  EXPECT_TRUE(checkPlacement(layoutOf({{16, 4, 4}}), {{2, 8}}, dgx, hosts, openMpi).empty());
}

TEST(Placement, ATpGroupOverHostsIsRefused) {
  // --map-by node: even ranks on a, odd on b; every tp pair is split.
  std::vector<std::string> hosts;
  for (int r = 0; r < 4; ++r)
    hosts.push_back(r % 2 ? "b" : "a");
  const auto findings = checkPlacement(layoutOf({{4, 2, 2}}), {{1, 4}}, dgx, hosts, openMpi);
  ASSERT_FALSE(findings.empty());
  EXPECT_TRUE(findings[0].refuses);
  EXPECT_NE(findings[0].text.find("2 of its 2 tp groups span hosts (the first on a (rank 0), b "
                                  "(rank 1))"),
            std::string::npos)
      << findings[0].text;
  EXPECT_NE(findings[0].text.find("--map-by ppr:8:node"), std::string::npos);
  // A cluster that lets tp span nodes only gets the stage's warning.
  const auto allowed =
      checkPlacement(layoutOf({{4, 2, 2}}), {{1, 4}}, {"ib-cluster", 8, true}, hosts, openMpi);
  ASSERT_EQ(allowed.size(), 1u);
  EXPECT_FALSE(allowed[0].refuses);
}

TEST(Placement, AStageOverMoreHostsThanItsMeshIsAWarning) {
  // A pipeline of two 1-node stages of 2 ranks; dp 2 each, one rank per host.
  const std::vector<std::string> hosts = {"a", "b", "c", "d"};
  const auto findings =
      checkPlacement(layoutOf({{2, 2, 1}, {2, 2, 1}}), {{1, 2}, {1, 2}}, dgx, hosts, openMpi);
  ASSERT_EQ(findings.size(), 2u);
  EXPECT_FALSE(findings[0].refuses);
  EXPECT_NE(findings[0].text.find("stage 0 (a mesh of 1 node x 2 GPUs) runs on 2 hosts, a (rank "
                                  "0), b (rank 1)"),
            std::string::npos)
      << findings[0].text;
  EXPECT_NE(findings[1].text.find("stage 1"), std::string::npos);
  // The same ranks two per host match the meshes.
  EXPECT_TRUE(checkPlacement(layoutOf({{2, 2, 1}, {2, 2, 1}}), {{1, 2}, {1, 2}}, dgx,
                             {"a", "a", "b", "b"}, openMpi)
                  .empty());
}

TEST(Placement, MoreRanksOnAHostThanANodeHasGpus) {
  const PlannedCluster small{"pairs", 2, false};
  const auto findings = checkPlacement(layoutOf({{4, 4, 1}}), {{2, 2}}, small, {"a", "a", "a", "b"},
                                       Launcher{LauncherKind::Slurm});
  ASSERT_FALSE(findings.empty());
  const PlacementFinding &last = findings.back();
  // A warning on CPU ranks; the trainer refuses it on GPUs (sharesGpus).
  EXPECT_FALSE(last.refuses);
  EXPECT_TRUE(last.sharesGpus);
  EXPECT_NE(last.text.find("host a runs 3 ranks (0-2), and a node of the pairs cluster has 2 GPUs"),
            std::string::npos)
      << last.text;
  EXPECT_NE(last.text.find("srun --ntasks-per-node=2"), std::string::npos) << last.text;
}

TEST(Placement, DescribesHosts) {
  EXPECT_EQ(describeHosts({"a", "a", "b", "a"}), "a (ranks 0-1, 3), b (rank 2)");
  EXPECT_EQ(describeHosts({"a", "a", "b", "a"}, {2, 3}), "b (rank 2), a (rank 3)");
}
