//===- SbatchScriptTest.cpp - The batch script a trainer prints -----------===//
#include "runtime/trainer/SbatchScript.h"

#include <gtest/gtest.h>

using namespace mist::rt;

namespace {

TrainerSpec twoStages(int gpusPerNode) {
  TrainerSpec spec;
  spec.model = "gpt";
  spec.plan = "2 stages: dp 2 tp 4 b 1 | dp 2 tp 4 b 1, G = 8";
  spec.cluster = {"a100-80g", gpusPerNode, false};
  StageSpec s;
  s.dp = 2;
  s.tp = 4;
  spec.stages = {s, s};
  return spec;
}

std::string scriptOf(const TrainerSpec &spec, std::vector<std::string> args, bool gpus,
                     int threads = 1) {
  std::vector<char *> argv;
  for (std::string &a : args)
    argv.push_back(a.data());
  Options o;
  o.threads = threads;
  return sbatchScript(spec, o, int(argv.size()), argv.data(), gpus);
}

bool has(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

} // namespace

TEST(SbatchScript, FillsNodesWithConsecutiveRanks) {
  const std::string s =
      scriptOf(twoStages(8), {"/opt/run/train", "--print-sbatch", "--steps", "9"}, true);
  EXPECT_TRUE(has(s, "#SBATCH --nodes=2\n")) << s;
  EXPECT_TRUE(has(s, "#SBATCH --ntasks-per-node=8\n")) << s;
  EXPECT_TRUE(has(s, "#SBATCH --gpus-per-node=8\n")) << s;
  EXPECT_TRUE(
      has(s, "srun --mpi=pmix --kill-on-bad-exit=1 --ntasks-per-node=8 --distribution=block:block "
             "--cpu-bind=cores /opt/run/train --steps 9\n"))
      << s; // the command line without --print-sbatch
}

TEST(SbatchScript, SmallJobsAndCpuRanks) {
  TrainerSpec spec = twoStages(8);
  spec.stages.pop_back(); // 8 ranks: one node
  const std::string s = scriptOf(spec, {"/t/train", "--data", "my tokens.bin"}, false, 4);
  EXPECT_TRUE(has(s, "#SBATCH --nodes=1\n")) << s;
  EXPECT_FALSE(has(s, "--gpus-per-node")) << s;
  EXPECT_TRUE(has(s, "#SBATCH --cpus-per-task=4\n")) << s;
  EXPECT_TRUE(has(s, "/t/train --data 'my tokens.bin'\n")) << s; // quoted for the shell
  // Uneven: 16 ranks on 6-GPU nodes take 3 nodes.
  EXPECT_TRUE(has(scriptOf(twoStages(6), {"/t/train"}, true), "#SBATCH --nodes=3\n"));
}
