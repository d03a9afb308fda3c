//===- RankLayoutTest.cpp - Plan stages to ranks, and re-slicing ----------===//
#include "runtime/comm/RankLayout.h"

#include <gtest/gtest.h>
#include <map>

using namespace mist::rt;

namespace {

RankLayout layoutOf(const std::vector<StageShape> &stages, int worldRank) {
  int worldSize = 0;
  for (const StageShape &s : stages)
    worldSize += s.ranks;
  std::string error;
  std::optional<RankLayout> layout = RankLayout::build(stages, worldSize, worldRank, error);
  EXPECT_TRUE(layout) << error;
  EXPECT_EQ(error, "");
  return layout ? *layout : RankLayout{};
}

std::string errorOf(const std::vector<StageShape> &stages, int worldSize, int worldRank) {
  std::string error;
  EXPECT_FALSE(RankLayout::build(stages, worldSize, worldRank, error));
  return error;
}

/// What must hold for every rank of every valid plan: each rank is where
/// worldRank() says, tp groups are contiguous, and every member of a group
/// sees the same group.
void expectConsistent(const std::vector<StageShape> &stages) {
  int worldSize = 0;
  for (const StageShape &s : stages)
    worldSize += s.ranks;
  std::vector<RankLayout> all;
  for (int r = 0; r < worldSize; ++r)
    all.push_back(layoutOf(stages, r));
  std::vector<int> seen(worldSize, 0);
  for (int r = 0; r < worldSize; ++r) {
    SCOPED_TRACE("world rank " + std::to_string(r));
    const RankLayout &l = all[r];
    EXPECT_EQ(l.myWorldRank, r);
    EXPECT_EQ(l.worldRank(l.stage, l.dpRank, l.tpRank), r);
    EXPECT_EQ(l.stageStart, l.stageStarts[l.stage]);
    ASSERT_EQ(l.tpGroup.size(), size_t(stages[l.stage].tp));
    ASSERT_EQ(l.dpGroup.size(), size_t(stages[l.stage].dp));
    EXPECT_EQ(l.tpGroup[l.tpRank], r);
    EXPECT_EQ(l.dpGroup[l.dpRank], r);
    for (size_t t = 1; t < l.tpGroup.size(); ++t)
      EXPECT_EQ(l.tpGroup[t], l.tpGroup[t - 1] + 1) << "tp group not contiguous";
    for (int member : l.tpGroup)
      EXPECT_EQ(all[member].tpGroup, l.tpGroup);
    for (int member : l.dpGroup)
      EXPECT_EQ(all[member].dpGroup, l.dpGroup);
    for (int s = 0; s < int(stages.size()); ++s)
      for (int d = 0; d < stages[s].dp; ++d)
        for (int t = 0; t < stages[s].tp; ++t)
          EXPECT_EQ(l.worldRank(s, d, t), all[0].worldRank(s, d, t));
    ++seen[l.worldRank(l.stage, l.dpRank, l.tpRank)];
  }
  EXPECT_EQ(seen, std::vector<int>(worldSize, 1));
}

TEST(RankLayout, OneStageDataParallel) {
  std::vector<StageShape> stages{{4, 4, 1}};
  for (int r = 0; r < 4; ++r) {
    RankLayout l = layoutOf(stages, r);
    EXPECT_EQ(l.stage, 0);
    EXPECT_EQ(l.stageStart, 0);
    EXPECT_EQ(l.dpRank, r);
    EXPECT_EQ(l.tpRank, 0);
    EXPECT_EQ(l.tpGroup, std::vector<int>{r});
    EXPECT_EQ(l.dpGroup, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_TRUE(l.isFirstStage());
    EXPECT_TRUE(l.isLastStage());
  }
  expectConsistent(stages);
}

TEST(RankLayout, TwoStagesOfDifferentShapes) {
  // docs/plan.md's example: stage 0 dp 2 x tp 2, stage 1 dp 4 x tp 1.
  std::vector<StageShape> stages{{4, 2, 2}, {4, 4, 1}};
  RankLayout r3 = layoutOf(stages, 3);
  EXPECT_EQ(r3.stage, 0);
  EXPECT_EQ(r3.dpRank, 1);
  EXPECT_EQ(r3.tpRank, 1);
  EXPECT_EQ(r3.tpGroup, (std::vector<int>{2, 3}));
  EXPECT_EQ(r3.dpGroup, (std::vector<int>{1, 3}));
  EXPECT_TRUE(r3.isFirstStage());
  EXPECT_FALSE(r3.isLastStage());

  RankLayout r5 = layoutOf(stages, 5);
  EXPECT_EQ(r5.stage, 1);
  EXPECT_EQ(r5.stageStart, 4);
  EXPECT_EQ(r5.dpRank, 1);
  EXPECT_EQ(r5.tpRank, 0);
  EXPECT_EQ(r5.tpGroup, std::vector<int>{5});
  EXPECT_EQ(r5.dpGroup, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_TRUE(r5.isLastStage());

  EXPECT_EQ(r5.stageStarts, (std::vector<int>{0, 4}));
  EXPECT_EQ(r5.worldRank(0, 1, 0), 2);
  EXPECT_EQ(r5.worldRank(1, 3, 0), 7);
  expectConsistent(stages);
}

TEST(RankLayout, ThreeStagesOfDifferentSizes) {
  std::vector<StageShape> stages{{2, 1, 2}, {6, 3, 2}, {1, 1, 1}};
  RankLayout r6 = layoutOf(stages, 6);
  EXPECT_EQ(r6.stage, 1);
  EXPECT_EQ(r6.stageStart, 2);
  EXPECT_EQ(r6.dpRank, 2);
  EXPECT_EQ(r6.tpRank, 0);
  EXPECT_EQ(r6.tpGroup, (std::vector<int>{6, 7}));
  EXPECT_EQ(r6.dpGroup, (std::vector<int>{2, 4, 6}));

  RankLayout r8 = layoutOf(stages, 8);
  EXPECT_EQ(r8.stage, 2);
  EXPECT_EQ(r8.stageStart, 8);
  EXPECT_EQ(r8.tpGroup, std::vector<int>{8});
  EXPECT_EQ(r8.dpGroup, std::vector<int>{8});
  EXPECT_EQ(r8.stageStarts, (std::vector<int>{0, 2, 8}));
  expectConsistent(stages);
  expectConsistent({{8, 2, 4}, {8, 8, 1}, {4, 1, 4}, {2, 2, 1}});
}

TEST(RankLayout, Errors) {
  EXPECT_EQ(errorOf({}, 1, 0), "the plan has no stages");
  EXPECT_EQ(errorOf({{4, 4, 1}, {4, 3, 1}}, 8, 0),
            "stage 1: dp * tp = 3 * 1 = 3, but the stage has 4 ranks");
  EXPECT_EQ(errorOf({{4, 2, 3}}, 4, 0), "stage 0: dp * tp = 2 * 3 = 6, but the stage has 4 ranks");
  EXPECT_EQ(errorOf({{0, 0, 1}}, 0, 0),
            "stage 0: ranks, dp and tp must be at least 1 (ranks 0, dp 0, tp 1)");
  EXPECT_EQ(errorOf({{4, 2, 2}, {4, 4, 1}}, 4, 0),
            "the plan's stages need 8 ranks, but the job has 4");
  EXPECT_EQ(errorOf({{4, 2, 2}}, 8, 0), "the plan's stages need 4 ranks, but the job has 8");
  EXPECT_EQ(errorOf({{4, 4, 1}}, 4, 4), "rank 4 is out of range for a job of 4 ranks");
  EXPECT_EQ(errorOf({{4, 4, 1}}, 4, -1), "rank -1 is out of range for a job of 4 ranks");

  RankLayout l = layoutOf({{4, 2, 2}}, 0);
  EXPECT_THROW(l.worldRank(1, 0, 0), std::out_of_range);
  EXPECT_THROW(l.worldRank(0, 2, 0), std::out_of_range);
  EXPECT_THROW(l.worldRank(0, 0, -1), std::out_of_range);
  EXPECT_THROW(reslice(l, 0, 1, 4), std::out_of_range);
  EXPECT_THROW(reslice(l, 0, 0, -1), std::invalid_argument);
}

TEST(RankLayout, SamplesOfDpRank) {
  EXPECT_EQ(samplesOfDpRank(0, 4, 8), (SampleRange{0, 2}));
  EXPECT_EQ(samplesOfDpRank(3, 4, 8), (SampleRange{6, 8}));
  EXPECT_EQ(samplesOfDpRank(0, 1, 8), (SampleRange{0, 8}));
  // Not divisible (plans never ask): contiguous, sizes differ by at most one.
  EXPECT_EQ(samplesOfDpRank(0, 3, 7), (SampleRange{0, 2}));
  EXPECT_EQ(samplesOfDpRank(1, 3, 7), (SampleRange{2, 4}));
  EXPECT_EQ(samplesOfDpRank(2, 3, 7), (SampleRange{4, 7}));
}

/// Every receiving rank gets each of its samples exactly once, from tp rank
/// 0 of the sender dp rank that holds it, and nothing else; transfers come
/// in the documented order.
void expectCompleteReslice(const std::vector<StageShape> &stages, int from, int to,
                           int64_t microBatch) {
  SCOPED_TRACE("stage " + std::to_string(from) + " -> " + std::to_string(to) +
               ", M = " + std::to_string(microBatch));
  RankLayout l = layoutOf(stages, 0);
  std::vector<Transfer> transfers = reslice(l, from, to, microBatch);
  std::map<int, std::vector<int>> timesReceived; // receiver world rank -> count per sample
  for (int d = 0; d < stages[to].dp; ++d)
    for (int t = 0; t < stages[to].tp; ++t)
      timesReceived[l.worldRank(to, d, t)].assign(microBatch, 0);
  for (size_t i = 0; i < transfers.size(); ++i) {
    const Transfer &x = transfers[i];
    ASSERT_TRUE(timesReceived.count(x.to)) << "rank " << x.to << " is not in stage " << to;
    RankLayout receiver = layoutOf(stages, x.to);
    RankLayout sender = layoutOf(stages, x.from);
    EXPECT_EQ(sender.stage, from);
    EXPECT_EQ(sender.tpRank, 0);
    SampleRange held = samplesOfDpRank(sender.dpRank, stages[from].dp, microBatch);
    SampleRange wanted = samplesOfDpRank(receiver.dpRank, stages[to].dp, microBatch);
    EXPECT_GT(x.rows.size(), 0);
    EXPECT_GE(x.rows.begin, std::max(held.begin, wanted.begin));
    EXPECT_LE(x.rows.end, std::min(held.end, wanted.end));
    for (int64_t s = x.rows.begin; s < x.rows.end; ++s)
      ++timesReceived[x.to][s];
    if (i > 0) {
      const Transfer &prev = transfers[i - 1];
      EXPECT_TRUE(prev.to < x.to || (prev.to == x.to && prev.rows.end <= x.rows.begin));
    }
  }
  for (auto &[rank, counts] : timesReceived) {
    RankLayout receiver = layoutOf(stages, rank);
    SampleRange wanted = samplesOfDpRank(receiver.dpRank, stages[to].dp, microBatch);
    for (int64_t s = 0; s < microBatch; ++s)
      EXPECT_EQ(counts[s], wanted.begin <= s && s < wanted.end ? 1 : 0)
          << "rank " << rank << ", sample " << s;
  }
}

TEST(Reslice, DpTwoToDpFour) {
  std::vector<StageShape> stages{{2, 2, 1}, {4, 4, 1}};
  RankLayout l = layoutOf(stages, 0);
  EXPECT_EQ(
      reslice(l, 0, 1, 8),
      (std::vector<Transfer>{{0, 2, {0, 2}}, {0, 3, {2, 4}}, {1, 4, {4, 6}}, {1, 5, {6, 8}}}));
  // Gradients go back the same way, reversed.
  EXPECT_EQ(
      reslice(l, 1, 0, 8),
      (std::vector<Transfer>{{2, 0, {0, 2}}, {3, 0, {2, 4}}, {4, 1, {4, 6}}, {5, 1, {6, 8}}}));
  expectCompleteReslice(stages, 0, 1, 8);
  expectCompleteReslice(stages, 1, 0, 8);
}

TEST(Reslice, DpFourToDpOneWithTensorParallelReceiver) {
  // Every tp rank of the receiver needs every sample: dp 4 -> (dp 1, tp 2).
  std::vector<StageShape> stages{{4, 4, 1}, {2, 1, 2}};
  RankLayout l = layoutOf(stages, 0);
  EXPECT_EQ(reslice(l, 0, 1, 8), (std::vector<Transfer>{{0, 4, {0, 2}},
                                                        {1, 4, {2, 4}},
                                                        {2, 4, {4, 6}},
                                                        {3, 4, {6, 8}},
                                                        {0, 5, {0, 2}},
                                                        {1, 5, {2, 4}},
                                                        {2, 5, {4, 6}},
                                                        {3, 5, {6, 8}}}));
  expectCompleteReslice(stages, 0, 1, 8);
  expectCompleteReslice(stages, 1, 0, 8);
}

TEST(Reslice, TensorParallelSenderSendsFromTpRankZero) {
  // (dp 2, tp 2) -> (dp 1, tp 1): world ranks 0 and 2 send, 1 and 3 do not.
  std::vector<StageShape> stages{{4, 2, 2}, {1, 1, 1}};
  RankLayout l = layoutOf(stages, 0);
  EXPECT_EQ(reslice(l, 0, 1, 6), (std::vector<Transfer>{{0, 4, {0, 3}}, {2, 4, {3, 6}}}));
  expectCompleteReslice(stages, 0, 1, 6);
}

TEST(Reslice, DpThreeToDpTwoSplitsASenderBetweenReceivers) {
  // b = 2 -> b = 3: sender dp rank 1 holds [2, 4), which straddles both receivers.
  std::vector<StageShape> stages{{3, 3, 1}, {2, 2, 1}};
  RankLayout l = layoutOf(stages, 0);
  EXPECT_EQ(
      reslice(l, 0, 1, 6),
      (std::vector<Transfer>{{0, 3, {0, 2}}, {1, 3, {2, 3}}, {1, 4, {3, 4}}, {2, 4, {4, 6}}}));
  expectCompleteReslice(stages, 0, 1, 6);
  expectCompleteReslice(stages, 1, 0, 6);
}

TEST(Reslice, EveryShapePairCoversEverySampleOnce) {
  std::vector<StageShape> shapes{{1, 1, 1}, {2, 2, 1}, {2, 1, 2}, {3, 3, 1}, {4, 4, 1},
                                 {4, 2, 2}, {4, 1, 4}, {6, 3, 2}, {8, 8, 1}};
  for (const StageShape &a : shapes)
    for (const StageShape &b : shapes)
      for (int64_t microBatch : {24, 48, 7, 0}) {
        std::vector<StageShape> stages{a, b, a};
        expectCompleteReslice(stages, 0, 1, microBatch);
        expectCompleteReslice(stages, 1, 2, microBatch);
        expectCompleteReslice(stages, 2, 1, microBatch);
      }
}

TEST(Reslice, SequenceParallelRanksHoldAContiguousTpThOfTheirSamplesTokens) {
  // dp 2, tp 2, 3 samples of 4 tokens a dp rank: tp rank 1 of dp rank 1
  // holds tokens [18, 24) of the 24.
  const StageShape stage{4, 2, 2};
  EXPECT_EQ(activationRowsOf(stage, 1, 1, 6, 4), (SampleRange{18, 24}));
  EXPECT_EQ(activationRowsOf(stage, 0, 1, 6, 4), (SampleRange{6, 12}));
  EXPECT_EQ(activationRowsOf(stage, 0, 1, 6), (SampleRange{0, 3})); // not split: samples
}

/// Under sequence parallelism every rank holds and wants its own tokens:
/// each receiver gets each of its tokens exactly once, from the rank that
/// holds it, whatever the two stages' dp and tp.
void expectCompleteSplitReslice(const std::vector<StageShape> &stages, int from, int to,
                                int64_t microBatch, int64_t tokensPerSample) {
  SCOPED_TRACE("stage " + std::to_string(from) + " -> " + std::to_string(to) +
               ", M = " + std::to_string(microBatch));
  RankLayout l = layoutOf(stages, 0);
  const int64_t tokens = microBatch * tokensPerSample;
  std::map<int, std::vector<int>> timesReceived;
  for (int d = 0; d < stages[to].dp; ++d)
    for (int t = 0; t < stages[to].tp; ++t)
      timesReceived[l.worldRank(to, d, t)].assign(size_t(tokens), 0);
  for (const Transfer &x : reslice(l, from, to, microBatch, tokensPerSample)) {
    RankLayout sender = layoutOf(stages, x.from), receiver = layoutOf(stages, x.to);
    ASSERT_EQ(sender.stage, from);
    ASSERT_EQ(receiver.stage, to);
    SampleRange held = activationRowsOf(stages[size_t(from)], sender.dpRank, sender.tpRank,
                                        microBatch, tokensPerSample);
    EXPECT_GE(x.rows.begin, held.begin);
    EXPECT_LE(x.rows.end, held.end);
    for (int64_t r = x.rows.begin; r < x.rows.end; ++r)
      ++timesReceived[x.to][size_t(r)];
  }
  for (auto &[rank, counts] : timesReceived) {
    RankLayout receiver = layoutOf(stages, rank);
    SampleRange wanted = activationRowsOf(stages[size_t(to)], receiver.dpRank, receiver.tpRank,
                                          microBatch, tokensPerSample);
    for (int64_t r = 0; r < tokens; ++r)
      EXPECT_EQ(counts[size_t(r)], wanted.begin <= r && r < wanted.end ? 1 : 0)
          << "rank " << rank << ", token " << r;
  }
}

TEST(Reslice, SequenceParallelEveryShapePairCoversEveryTokenOnce) {
  std::vector<StageShape> shapes{{1, 1, 1}, {2, 2, 1}, {2, 1, 2}, {4, 2, 2}, {4, 1, 4}, {6, 3, 2}};
  for (const StageShape &a : shapes)
    for (const StageShape &b : shapes)
      for (int64_t microBatch : {12, 24, 0}) {
        std::vector<StageShape> stages{a, b};
        expectCompleteSplitReslice(stages, 0, 1, microBatch, 8);
        expectCompleteSplitReslice(stages, 1, 0, microBatch, 8);
      }
  // (dp 1, tp 2) -> (dp 2, tp 1), 2 samples of 4 tokens: each sender's
  // half is one receiver's sample.
  RankLayout l = layoutOf({{2, 1, 2}, {2, 2, 1}}, 0);
  EXPECT_EQ(reslice(l, 0, 1, 2, 4), (std::vector<Transfer>{{0, 2, {0, 4}}, {1, 3, {4, 8}}}));
}

} // namespace
