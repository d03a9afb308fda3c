//===- SequenceParallelTest.cpp - Sequence parallelism and tp overlap -----===//
/// Megatron-LM's sequence parallelism on a real model's profile against the
/// closed forms of Korthikanti et al. (every activation of a layer a tp-th),
/// its collectives counted by hand, and tp-communication overlap on
/// hand-built layer numbers.
//===----------------------------------------------------------------------===//
#include "HandCluster.h"
#include "TestUtil.h"
#include "perfmodel/StageModel.h"

using namespace mist;
using namespace mist::test;

namespace {

std::optional<ModelProfile> gpt13b() {
  auto c = compileFile(std::string(MIST_EXAMPLES_DIR) + "/gpt3-1.3b.mist");
  if (!c->module)
    return std::nullopt;
  return ModelProfile::build(*c->module, c->diag);
}

TEST(SequenceParallel, EveryLayerActivationIsATpThOfTheSequence) {
  auto mp = gpt13b();
  ASSERT_TRUE(mp);
  Cluster cl = handCluster();
  const double s = 2048, h = 2048, a = 16;
  for (int b : {1, 4})
    for (int tp : {2, 8}) {
      RegionNumbers plain = mp->evaluate(RegionKind::Layer, b, tp, cl),
                    sp = mp->evaluate(RegionKind::Layer, b, tp, cl, /*sequenceParallel=*/true);
      // Without: s b h (8 + 24 / tp) bytes, the 8 replicated (the norms' inputs
      // and outputs); with it, all of it divided by tp (the norms' statistics
      // too): Korthikanti et al. 2022, eq. 2 vs. eq. 4 without dropout and
      // with flash attention's per-row statistics instead of scores.
      EXPECT_DOUBLE_EQ(plain.savedFull,
                       s * b * h * (8 + 24.0 / tp) + 4 * b * a * s / tp + 16 * b * s);
      EXPECT_DOUBLE_EQ(sp.savedFull, (32 * s * b * h + 4 * b * a * s + 16 * b * s) / tp);
      EXPECT_DOUBLE_EQ(sp.savedCkpt, 2 * b * s * h / tp); // the layer input, split
      EXPECT_DOUBLE_EQ(sp.output, 2 * b * s * h / tp);
      EXPECT_DOUBLE_EQ(sp.gradIn, 2 * b * s * h / tp);
      // The GEMMs are the same; the split ops run on a tp-th of the rows.
      EXPECT_DOUBLE_EQ(sp.gemmFwd, plain.gemmFwd);
      EXPECT_DOUBLE_EQ(sp.gemmBwd, plain.gemmBwd);
      EXPECT_LT(sp.fwdCompute, plain.fwdCompute);
      EXPECT_LT(sp.bwdCompute, plain.bwdCompute);
      EXPECT_LT(sp.bwdPeak, plain.bwdPeak);
    }
  // At tp = 1 there is nothing to split.
  RegionNumbers one = mp->evaluate(RegionKind::Layer, 2, 1, cl),
                oneSp = mp->evaluate(RegionKind::Layer, 2, 1, cl, true);
  EXPECT_EQ(one.savedFull, oneSp.savedFull);
  EXPECT_EQ(one.fwdCompute, oneSp.fwdCompute);
  EXPECT_EQ(one.bwdPeak, oneSp.bwdPeak);
}

TEST(SequenceParallel, AllReducesBecomeReduceScattersAndAllGathers) {
  auto mp = gpt13b();
  ASSERT_TRUE(mp);
  Cluster cl = handCluster();
  const int b = 2, tp = 4;
  const double act = 2.0 * b * 2048 * 2048; // one [b, s, h] bf16 activation
  auto seconds = [&](Collective kind) { return collectiveSeconds(cl, kind, act, 1, tp); };
  RegionNumbers plain = mp->evaluate(RegionKind::Layer, b, tp, cl),
                sp = mp->evaluate(RegionKind::Layer, b, tp, cl, true);
  // Two row-parallel outputs (attention projection, MLP down) are all-reduced
  // forward; the two column-parallel inputs' gradients backward.
  EXPECT_DOUBLE_EQ(plain.tpFwd, 2 * seconds(Collective::AllReduce));
  EXPECT_DOUBLE_EQ(plain.tpBwd, 2 * seconds(Collective::AllReduce));
  EXPECT_EQ(plain.tpBwdBesideGemm, 0);
  // Under sequence parallelism: forward, an all-gather in front of each
  // column-parallel op and a reduce-scatter after each row-parallel one;
  // backward, the reverse, plus a re-gather of each column-parallel input
  // for its weight gradient, beside the GEMMs.
  EXPECT_DOUBLE_EQ(sp.tpFwd,
                   2 * seconds(Collective::AllGather) + 2 * seconds(Collective::ReduceScatter));
  EXPECT_DOUBLE_EQ(sp.tpBwd,
                   2 * seconds(Collective::AllGather) + 2 * seconds(Collective::ReduceScatter));
  EXPECT_DOUBLE_EQ(sp.tpBwdBesideGemm, 2 * seconds(Collective::AllGather));
}

/// A layer: 1 ms forward of which 0.8 ms GEMMs, 2 ms backward of which 1.6
/// ms GEMMs, 0.4 ms of tp collectives forward and 0.8 ms backward.
StageNumbers tpNumbers() {
  StageNumbers n;
  RegionNumbers &L = n.layer;
  L.params = 0;
  L.fwdCompute = 1e-3;
  L.bwdCompute = 2e-3;
  L.gemmFwd = 0.8e-3;
  L.gemmBwd = 1.6e-3;
  L.tpFwd = 0.4e-3;
  L.tpBwd = 0.8e-3;
  return n;
}

StageKnobs tpKnobs(bool overlap) {
  StageKnobs k;
  k.layers = 4;
  k.gradAccum = 8;
  k.tp = 2;
  k.sequenceParallel = overlap;
  k.tpCommOverlap = overlap;
  return k;
}

TEST(TpCommOverlap, AllButOneChunkHidesBehindTheGemms) {
  Cluster c = handCluster();
  InterferenceTable it(c);
  StageEstimate serial = estimateStage(tpKnobs(false), tpNumbers(), c, it);
  EXPECT_NEAR(serial.t, 4 * (1e-3 + 0.4e-3 + 2e-3 + 0.8e-3), 1e-12);
  // tp = 2 chunks: one chunk's transfer (half) stays exposed, the other
  // half runs beside half the GEMMs, which are longer.
  StageEstimate overlapped = estimateStage(tpKnobs(true), tpNumbers(), c, it);
  EXPECT_NEAR(overlapped.t, 4 * (1e-3 + 0.2e-3 + 2e-3 + 0.4e-3), 1e-12);
}

TEST(TpCommOverlap, InterferenceSlowsTheGemmsBesideTheCollectives) {
  Cluster c = handCluster();
  c.interference = {{{Stream::Compute, Stream::G2G}, {1.5, 2.0}}};
  InterferenceTable it(c);
  // Forward: 0.4 ms of GEMMs beside 0.2 ms of transfers. Together the
  // transfers take 0.4 ms (factor 2); the GEMMs have 0.4 - 0.4 / 1.5 ms left
  // after them, alone: 0.4 + 0.4 / 3 ms for 0.4 ms of GEMMs, 0.4 / 3 ms more,
  // beside the exposed chunk's 0.2 ms. The backward is the same doubled.
  const double fwdTp = 0.2e-3 + 0.4e-3 / 3, bwdTp = 2 * fwdTp;
  StageEstimate e = estimateStage(tpKnobs(true), tpNumbers(), c, it);
  EXPECT_NEAR(e.t, 4 * (1e-3 + fwdTp + 2e-3 + bwdTp), 1e-12);
}

TEST(SequenceParallel, RegathersCostOnlyWhatTheirGemmsDoNotHide) {
  Cluster c = handCluster();
  InterferenceTable it(c);
  StageKnobs k = tpKnobs(false);
  StageNumbers n = tpNumbers();
  n.layer.tpBwdBesideGemm = 0.5e-3; // under the backward's 1.6 ms of GEMMs
  EXPECT_NEAR(estimateStage(k, n, c, it).t, 4 * (1e-3 + 0.4e-3 + 2e-3 + 0.8e-3), 1e-12);
  n.layer.gemmBwd = 0.2e-3; // now 0.3 ms of it shows
  EXPECT_NEAR(estimateStage(k, n, c, it).t, 4 * (1e-3 + 0.4e-3 + 2e-3 + 0.8e-3 + 0.3e-3), 1e-12);
}

} // namespace
