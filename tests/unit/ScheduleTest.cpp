//===- ScheduleTest.cpp - The per-stage step sequence of a plan -----------===//
/// The 1F1B order is deadlock-free and keeps at most min(S - i, G)
/// micro-batches in flight on stage i (what the memory model charges), and
/// every knob of the plan shows up as the steps it implies, and only then.
//===----------------------------------------------------------------------===//
#include "backend/reports/ScheduleListing.h"
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

using namespace mist;

namespace {

/// Replays every stage's order with blocking sends: a forward of micro-batch
/// m on stage i needs stage i-1's forward of m, a backward needs stage
/// i+1's backward of m (the last stage its own forward). Returns whether
/// every stage finished.
bool completes(int S, int G) {
  std::vector<std::vector<std::pair<int, bool>>> orders;
  for (int i = 0; i < S; ++i)
    orders.push_back(oneFOneB(i, S, G));
  std::vector<std::vector<bool>> fwd(S, std::vector<bool>(G)), bwd(S, std::vector<bool>(G));
  std::vector<size_t> next(S, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int i = 0; i < S; ++i)
      while (next[i] < orders[i].size()) {
        auto [mb, forward] = orders[i][next[i]];
        bool ready =
            forward ? (i == 0 || fwd[i - 1][mb]) : (i == S - 1 ? fwd[i][mb] : bwd[i + 1][mb]);
        if (!ready)
          break;
        (forward ? fwd : bwd)[i][mb] = true;
        ++next[i];
        progress = true;
      }
  }
  for (int i = 0; i < S; ++i)
    if (next[i] != orders[i].size())
      return false;
  return true;
}

TEST(Schedule, OneFOneBIsCompleteDeadlockFreeAndBoundsInFlight) {
  for (int S = 1; S <= 8; ++S)
    for (int G = 1; G <= 12; ++G) {
      EXPECT_TRUE(completes(S, G)) << "S " << S << " G " << G;
      for (int i = 0; i < S; ++i) {
        auto order = oneFOneB(i, S, G);
        ASSERT_EQ(order.size(), size_t(2 * G));
        int inFlight = 0, most = 0, f = 0, b = 0;
        for (auto [mb, forward] : order) {
          // Forwards and backwards each run in micro-batch order; a
          // micro-batch's backward follows its forward.
          EXPECT_EQ(mb, forward ? f++ : b++);
          EXPECT_LT(b, f + 1);
          inFlight += forward ? 1 : -1;
          most = std::max(most, inFlight);
        }
        EXPECT_EQ(most, std::min(S - i, G)) << "S " << S << " G " << G << " stage " << i;
      }
    }
}

/// The same replay for interleaved 1F1B: model chunk m = c S + i of
/// micro-batch mb needs chunk m - 1's forward (the first chunk nothing), its
/// backward chunk m + 1's backward (the last chunk its own forward).
bool interleavedCompletes(int S, int G, int v) {
  const int M = S * v;
  std::vector<std::vector<ScheduledRun>> orders;
  for (int i = 0; i < S; ++i)
    orders.push_back(interleavedOneFOneB(i, S, G, v));
  std::vector<std::vector<bool>> fwd(M, std::vector<bool>(G)), bwd(M, std::vector<bool>(G));
  std::vector<size_t> next(S, 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int i = 0; i < S; ++i)
      while (next[i] < orders[i].size()) {
        const ScheduledRun r = orders[i][next[i]];
        const int m = r.chunk * S + i;
        const bool ready = r.forward ? (m == 0 || fwd[m - 1][r.mb])
                                     : (m == M - 1 ? fwd[m][r.mb] : bwd[m + 1][r.mb]);
        if (!ready)
          break;
        std::vector<std::vector<bool>> &done = r.forward ? fwd : bwd;
        EXPECT_FALSE(done[m][r.mb]) << "a run twice";
        done[m][r.mb] = true;
        ++next[i];
        progress = true;
      }
  }
  for (int i = 0; i < S; ++i)
    if (next[i] != orders[i].size())
      return false;
  return true;
}

TEST(Schedule, InterleavedOneFOneBIsCompleteAndDeadlockFree) {
  for (int S = 2; S <= 6; ++S)
    for (int v = 2; v <= 4; ++v)
      for (int G = S; G <= 3 * S; G += S) {
        EXPECT_TRUE(interleavedCompletes(S, G, v)) << "S " << S << " G " << G << " v " << v;
        for (int i = 0; i < S; ++i) {
          const std::vector<ScheduledRun> order = interleavedOneFOneB(i, S, G, v);
          ASSERT_EQ(order.size(), size_t(2 * G * v));
          // Warm-up as Megatron-LM counts it, then the steady pairs begin
          // with a forward.
          int leading = 0;
          while (order[size_t(leading)].forward)
            ++leading;
          EXPECT_EQ(leading, std::min((S - i - 1) * 2 + (v - 1) * S + 1, G * v));
        }
      }
  // One chunk per stage is plain 1F1B.
  std::vector<ScheduledRun> plain;
  for (auto [mb, forward] : oneFOneB(1, 4, 6))
    plain.push_back({mb, 0, forward});
  EXPECT_EQ(interleavedOneFOneB(1, 4, 6, 1), plain);
}

TEST(Schedule, InterleavedChunksSplitTheStageAndItsCheckpointedLayers) {
  Plan p;
  p.model = "m";
  p.globalBatch = 8;
  p.gradAccum = 4;
  p.virtualStages = 2;
  for (int i = 0; i < 2; ++i) {
    StagePlan st;
    st.firstLayer = 4 * i;
    st.lastLayer = 4 * i + 3;
    st.microBatch = 2;
    st.ckptLayers = 3;
    p.stages.push_back(st);
  }
  const StageSchedule s = buildStageSchedule(p, 1);
  ASSERT_EQ(s.chunks.size(), 2u);
  // Stage 1 holds the model's chunks 1 and 3: layers 2-3 and 6-7.
  EXPECT_EQ(s.chunks[0].place.firstLayer, 2);
  EXPECT_EQ(s.chunks[1].place.firstLayer, 6);
  // Its last 3 layers are checkpointed: one of chunk 0's, both of chunk 1's.
  EXPECT_EQ(s.chunks[0].knobs.ckpt, 1);
  EXPECT_EQ(s.chunks[1].knobs.ckpt, 2);
  // Only the last chunk of the last stage runs post; the others send on.
  EXPECT_FALSE(s.chunks[0].knobs.last);
  EXPECT_TRUE(s.chunks[1].knobs.last);
  auto has = [](const std::vector<Step> &steps, StepKind k) {
    return std::any_of(steps.begin(), steps.end(), [&](const Step &x) { return x.kind == k; });
  };
  EXPECT_TRUE(has(s.phase(Phase::Forward, 0), StepKind::SendActivations));
  EXPECT_TRUE(has(s.phase(Phase::Forward, 1), StepKind::PostForward));
  const StageSchedule s0 = buildStageSchedule(p, 0);
  EXPECT_TRUE(has(s0.phase(Phase::Forward, 0), StepKind::PreForward));
  EXPECT_TRUE(has(s0.phase(Phase::Forward, 1), StepKind::ReceiveActivations));
  EXPECT_TRUE(has(s0.phase(Phase::Backward, 1), StepKind::SendGradients));
}

Plan twoStages() {
  Plan p;
  p.model = "m";
  p.globalBatch = 16;
  p.gradAccum = 4;
  StagePlan a;
  a.firstLayer = 0;
  a.lastLayer = 3;
  a.meshGpusPerNode = 4;
  a.microBatch = 2;
  a.dp = 2;
  a.tp = 2;
  StagePlan b = a;
  b.firstLayer = 4;
  b.lastLayer = 7;
  p.stages = {a, b};
  return p;
}

/// A step with its listing's words (backend/reports/ScheduleListing.h) and its
/// layer in the model's numbering.
struct Described {
  Stream stream;
  int layer;
  std::string what;
};

int count(const std::vector<Described> &steps, const std::string &needle, int layer = -2) {
  int n = 0;
  for (const Described &s : steps)
    n += s.what.find(needle) != std::string::npos && (layer == -2 || s.layer == layer);
  return n;
}

std::vector<Described> phase(const StageSchedule &s, Phase k, int firstLayer = -1) {
  std::vector<Described> out;
  for (const Step &step : s.phase(k))
    out.push_back({step.stream(), step.layer < 0 ? -1 : step.layer + std::max(0, firstLayer),
                   describeStep(step, k, s)});
  return out;
}

TEST(Schedule, DataParallelReductionFollowsTheZeroFlags) {
  Plan p = twoStages();
  StageSchedule none = buildStageSchedule(p, 1);
  EXPECT_EQ(count(phase(none, Phase::LastBackward), "all-reduce the gradients over dp"), 4);
  EXPECT_EQ(count(phase(none, Phase::Backward), "over dp"), 0); // accumulate locally
  EXPECT_EQ(count(phase(none, Phase::FirstForward), "all-gather"), 0);

  p.stages[1].zero = {false, false, true}; // ZeRO-1
  StageSchedule z1 = buildStageSchedule(p, 1);
  EXPECT_EQ(count(phase(z1, Phase::LastBackward), "reduce-scatter"), 4);
  EXPECT_EQ(count(phase(z1, Phase::FirstForward), "all-gather the updated weight shards"), 4);
  EXPECT_EQ(count(phase(z1, Phase::Forward), "all-gather"), 0);

  p.stages[1].zero = {false, true, true}; // ZeRO-2
  StageSchedule z2 = buildStageSchedule(p, 1);
  EXPECT_EQ(count(phase(z2, Phase::Backward), "reduce-scatter"), 4); // every micro-batch

  p.stages[1].zero = {true, true, true}; // ZeRO-3
  StageSchedule z3 = buildStageSchedule(p, 1);
  EXPECT_EQ(count(phase(z3, Phase::Forward), "all-gather the weights"), 4);
  EXPECT_EQ(count(phase(z3, Phase::Backward), "all-gather the weights"), 4);
  EXPECT_EQ(count(phase(z3, Phase::FirstForward), "updated weight shards"), 0);

  p.stages[1].dp = 1; // nothing to reduce or shard over
  p.stages[1].tp = 4;
  StageSchedule single = buildStageSchedule(p, 1);
  for (unsigned k = 0; k < numPhases; ++k)
    EXPECT_EQ(count(phase(single, Phase(k)), "over dp"), 0);
}

TEST(Schedule, CheckpointingRecomputesTheLastLayersOnly) {
  Plan p = twoStages();
  p.stages[0].ckptLayers = 3; // layers 1, 2, 3
  StageSchedule s = buildStageSchedule(p, 0);
  for (int l = 0; l <= 3; ++l) {
    int expected = l >= 1 ? 1 : 0;
    EXPECT_EQ(count(phase(s, Phase::Backward), "recompute", l), expected) << l;
    EXPECT_EQ(count(phase(s, Phase::Forward), "keeping only the layer's input", l), expected) << l;
  }
}

TEST(Schedule, OffloadStepsAppearExactlyForOffloadedState) {
  Plan p = twoStages();
  StageSchedule plain = buildStageSchedule(p, 0);
  for (unsigned k = 0; k < numPhases; ++k)
    for (const Described &s : phase(plain, Phase(k)))
      EXPECT_TRUE(s.stream == Stream::Compute || s.stream == Stream::G2G) << s.what;

  p.stages[0].offload = {0, 0, 0.5, 0.25}; // optimizer state and activations
  StageSchedule off = buildStageSchedule(p, 0);
  EXPECT_EQ(count(phase(off, Phase::Forward), "swap out the saved activations (25%)"), 4);
  EXPECT_EQ(count(phase(off, Phase::Backward), "swap in the saved activations (25%)"), 4);
  EXPECT_EQ(count(phase(off, Phase::FirstForward), "fetch the offloaded optimizer state (50%)"), 4);
  EXPECT_EQ(count(phase(off, Phase::Forward), "optimizer"), 0); // only the first forward steps
  EXPECT_EQ(count(phase(off, Phase::Backward), "weights ("), 0);
}

TEST(Schedule, StagesTalkToTheirNeighbours) {
  Plan p = twoStages();
  StageSchedule first = buildStageSchedule(p, 0), last = buildStageSchedule(p, 1);
  EXPECT_EQ(count(phase(first, Phase::Forward), "send the activations to stage 1"), 1);
  EXPECT_EQ(count(phase(first, Phase::Backward), "receive the output gradients from stage 1"), 1);
  EXPECT_EQ(
      count(phase(last, Phase::Forward), "receive the micro-batch's activations from stage 0"), 1);
  EXPECT_EQ(count(phase(last, Phase::Backward), "send the input gradients to stage 0"), 1);
  EXPECT_EQ(count(phase(first, Phase::Forward), "pre forward"), 1);
  EXPECT_EQ(count(phase(last, Phase::Forward), "post forward"), 1);
  EXPECT_EQ(count(phase(first, Phase::Forward), "post"), 0);
}

/// The index of the first step of `kind` for `layer` in a phase, or -1.
int find(const std::vector<Step> &steps, StepKind kind, int layer) {
  for (size_t j = 0; j < steps.size(); ++j)
    if (steps[j].kind == kind && steps[j].layer == layer)
      return int(j);
  return -1;
}

bool waitsFor(const std::vector<Step> &steps, int j, int i) {
  return j >= 0 && i >= 0 &&
         std::find(steps[j].after.begin(), steps[j].after.end(), i) != steps[j].after.end();
}

TEST(Schedule, StepsWaitForTheStepsThatProduceWhatTheyRead) {
  Plan p = twoStages();
  p.stages[1].zero = {true, true, true}; // ZeRO-3 on the last stage
  p.stages[1].offload = {0.5, 0, 0, 0.25};
  const StageSchedule last = buildStageSchedule(p, 1);
  const std::vector<Step> &fwd = last.phase(Phase::Forward);
  const int forward = find(fwd, StepKind::Forward, 2);
  EXPECT_TRUE(waitsFor(fwd, forward, find(fwd, StepKind::GatherWeights, 2)));
  EXPECT_TRUE(waitsFor(fwd, forward, find(fwd, StepKind::FetchWeights, 2)));
  EXPECT_FALSE(waitsFor(fwd, forward, find(fwd, StepKind::GatherWeights, 3))); // the next layer's
  EXPECT_TRUE(waitsFor(fwd, find(fwd, StepKind::SwapOutActivations, 2), forward));
  // The first computation after the received activations waits for them.
  EXPECT_TRUE(
      waitsFor(fwd, find(fwd, StepKind::Forward, 0), find(fwd, StepKind::ReceiveActivations, -1)));
  EXPECT_FALSE(
      waitsFor(fwd, find(fwd, StepKind::Forward, 1), find(fwd, StepKind::ReceiveActivations, -1)));

  const std::vector<Step> &bwd = last.phase(Phase::Backward);
  const int backward = find(bwd, StepKind::Backward, 1);
  EXPECT_TRUE(waitsFor(bwd, find(bwd, StepKind::ReduceScatterGradients, 1), backward));
  EXPECT_TRUE(waitsFor(bwd, backward, find(bwd, StepKind::SwapInActivations, 1)));
  EXPECT_TRUE(
      waitsFor(bwd, find(bwd, StepKind::SendGradients, -1), find(bwd, StepKind::Backward, 0)));

  // One stage: the pre and post reductions wait for their own backward.
  Plan one = twoStages();
  one.stages[0].lastLayer = 7;
  one.stages.pop_back();
  const StageSchedule single = buildStageSchedule(one, 0);
  const std::vector<Step> &lastBwd = single.phase(Phase::LastBackward);
  EXPECT_TRUE(waitsFor(lastBwd, find(lastBwd, StepKind::ReducePreGradients, -1),
                       find(lastBwd, StepKind::PreBackward, -1)));
  EXPECT_TRUE(waitsFor(lastBwd, find(lastBwd, StepKind::ReducePostGradients, -1),
                       find(lastBwd, StepKind::PostBackward, -1)));
  // Every dependency points backwards: a phase runs in one pass.
  for (unsigned k = 0; k < numPhases; ++k)
    for (const std::vector<Step> *steps : {&last.phase(Phase(k)), &single.phase(Phase(k))})
      for (size_t j = 0; j < steps->size(); ++j)
        for (int a : (*steps)[j].after)
          EXPECT_LT(a, int(j));
}

TEST(Schedule, StepKindsHaveDistinctNames) {
  std::set<std::string> names;
  for (unsigned k = 0; k < numStepKinds; ++k)
    names.insert(stepName(StepKind(k)));
  EXPECT_EQ(names.size(), size_t(numStepKinds));
  EXPECT_STREQ(stepName(StepKind::AllReduceGradients), "all-reduce-gradients");
  EXPECT_EQ(streamOf(StepKind::SwapOutActivations), Stream::D2H);
}

} // namespace
