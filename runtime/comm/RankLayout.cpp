//===- RankLayout.cpp - Where each plan stage's dp and tp ranks live ------===//
#include "runtime/comm/RankLayout.h"

#include <algorithm>
#include <stdexcept>

namespace mist::rt {

namespace {

std::string checkStages(const std::vector<StageShape> &stages, int worldSize, int worldRank) {
  if (stages.empty())
    return "the plan has no stages";
  int64_t total = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    const StageShape &s = stages[i];
    std::string name = "stage " + std::to_string(i);
    if (s.ranks < 1 || s.dp < 1 || s.tp < 1)
      return name + ": ranks, dp and tp must be at least 1 (ranks " + std::to_string(s.ranks) +
             ", dp " + std::to_string(s.dp) + ", tp " + std::to_string(s.tp) + ")";
    if (int64_t(s.dp) * s.tp != s.ranks)
      return name + ": dp * tp = " + std::to_string(s.dp) + " * " + std::to_string(s.tp) + " = " +
             std::to_string(int64_t(s.dp) * s.tp) + ", but the stage has " +
             std::to_string(s.ranks) + " ranks";
    total += s.ranks;
  }
  if (total != worldSize)
    return "the plan's stages need " + std::to_string(total) + " ranks, but the job has " +
           std::to_string(worldSize);
  if (worldRank < 0 || worldRank >= worldSize)
    return "rank " + std::to_string(worldRank) + " is out of range for a job of " +
           std::to_string(worldSize) + " ranks";
  return "";
}

} // namespace

std::optional<RankLayout> RankLayout::build(const std::vector<StageShape> &stages, int worldSize,
                                            int worldRank, std::string &error) {
  error = checkStages(stages, worldSize, worldRank);
  if (!error.empty())
    return std::nullopt;

  RankLayout layout;
  layout.stages = stages;
  layout.worldSize = worldSize;
  layout.myWorldRank = worldRank;
  int start = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    layout.stageStarts.push_back(start);
    if (worldRank >= start && worldRank < start + stages[i].ranks) {
      layout.stage = static_cast<int>(i);
      layout.stageStart = start;
    }
    start += stages[i].ranks;
  }
  const StageShape &mine = stages[layout.stage];
  int inStage = worldRank - layout.stageStart;
  layout.dpRank = inStage / mine.tp;
  layout.tpRank = inStage % mine.tp;
  for (int t = 0; t < mine.tp; ++t)
    layout.tpGroup.push_back(layout.worldRank(layout.stage, layout.dpRank, t));
  for (int d = 0; d < mine.dp; ++d)
    layout.dpGroup.push_back(layout.worldRank(layout.stage, d, layout.tpRank));
  return layout;
}

int RankLayout::worldRank(int stage, int dpRank, int tpRank) const {
  if (stage < 0 || stage >= static_cast<int>(stages.size()))
    throw std::out_of_range("RankLayout::worldRank: no stage " + std::to_string(stage));
  const StageShape &s = stages[stage];
  if (dpRank < 0 || dpRank >= s.dp || tpRank < 0 || tpRank >= s.tp)
    throw std::out_of_range("RankLayout::worldRank: stage " + std::to_string(stage) +
                            " has no dp rank " + std::to_string(dpRank) + " / tp rank " +
                            std::to_string(tpRank));
  return stageStarts[stage] + dpRank * s.tp + tpRank;
}

SampleRange samplesOfDpRank(int dpRank, int dp, int64_t globalMicroBatch) {
  return {dpRank * globalMicroBatch / dp, (dpRank + 1) * globalMicroBatch / dp};
}

SampleRange activationRowsOf(const StageShape &stage, int dpRank, int tpRank,
                             int64_t globalMicroBatch, int64_t tokensPerSample) {
  const SampleRange samples = samplesOfDpRank(dpRank, stage.dp, globalMicroBatch);
  if (tokensPerSample <= 0)
    return samples;
  const int64_t part = samples.size() * tokensPerSample / stage.tp;
  const int64_t begin = samples.begin * tokensPerSample + tpRank * part;
  return {begin, begin + part};
}

std::vector<Transfer> reslice(const RankLayout &layout, int fromStage, int toStage,
                              int64_t globalMicroBatch, int64_t tokensPerSample) {
  int stageCount = static_cast<int>(layout.stages.size());
  if (fromStage < 0 || fromStage >= stageCount || toStage < 0 || toStage >= stageCount)
    throw std::out_of_range("reslice: stage out of range");
  if (globalMicroBatch < 0)
    throw std::invalid_argument("reslice: negative micro-batch size");
  const StageShape &sender = layout.stages[fromStage];
  const StageShape &receiver = layout.stages[toStage];

  // Replicated over tp, a stage's activations are sent by its tp rank 0.
  const int senderTp = tokensPerSample > 0 ? sender.tp : 1;
  std::vector<Transfer> transfers;
  for (int q = 0; q < receiver.dp; ++q)
    for (int t = 0; t < receiver.tp; ++t) {
      const int to = layout.worldRank(toStage, q, t);
      const SampleRange wanted =
          activationRowsOf(receiver, q, t, globalMicroBatch, tokensPerSample);
      for (int r = 0; r < sender.dp; ++r)
        for (int u = 0; u < senderTp; ++u) {
          const SampleRange held =
              activationRowsOf(sender, r, u, globalMicroBatch, tokensPerSample);
          SampleRange common{std::max(wanted.begin, held.begin), std::min(wanted.end, held.end)};
          if (common.size() > 0)
            transfers.push_back({layout.worldRank(fromStage, r, u), to, common});
        }
    }
  return transfers;
}

} // namespace mist::rt
