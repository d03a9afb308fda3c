//===- StageModelTest.cpp - Memory and time model on hand-built cases -----===//
/// A synthetic cluster and synthetic layer numbers make every expected value
/// computable by hand; the last tests pin the profile of a real model to the
/// closed forms of the cost model.
//===----------------------------------------------------------------------===//
#include "HandCluster.h"
#include "TestUtil.h"
#include "perfmodel/Evaluator.h"

#include <optional>

using namespace mist;
using namespace mist::test;

namespace {

/// A layer with 1e6 parameters per rank, 1 ms forward, 2 ms backward.
StageNumbers handNumbers() {
  StageNumbers n;
  RegionNumbers &L = n.layer;
  L.params = 1e6;
  L.fwdCompute = 1e-3;
  L.bwdCompute = 2e-3;
  L.savedFull = 100e6;
  L.savedCkpt = 10e6;
  L.fwdPeakFull = 120e6;
  L.fwdPeakCkpt = 30e6;
  L.bwdPeak = 150e6;
  L.gradIn = 10e6;
  L.output = 10e6;
  return n; // pre and post are empty
}

// One layer's optimizer step: the gradient norm reads the fp32 gradient (4
// bytes), Adam reads and writes m, v and the fp32 masters (24), reads the
// gradient again (4) and writes the bf16 weight (2).
constexpr double adamSeconds = 1e6 * 34 / 1000e9;
// Zeroing its fp32 gradient sum for the step's micro-batches (4 bytes).
constexpr double clearSeconds = 1e6 * 4 / 1000e9;
constexpr double stepSeconds = adamSeconds + clearSeconds;

TEST(Interference, NoFactorsMeansFullOverlap) {
  InterferenceTable it(handCluster());
  double load[4] = {3, 1, 2, 0};
  EXPECT_DOUBLE_EQ(it.overlap(load), 3);
}

TEST(Interference, ProgressiveSlowdown) {
  Cluster c = handCluster();
  c.interference = {{{Stream::Compute, Stream::G2G}, {1.5, 2.0}}};
  InterferenceTable it(c);
  // Together: compute needs 2*1.5 = 3, comm 1*2 = 2. After 2 s the comm is
  // done and compute has 2 - 2/1.5 = 2/3 s of work left, run alone.
  double load[4] = {2, 1, 0, 0};
  EXPECT_NEAR(it.overlap(load), 2 + 2.0 / 3, 1e-12);
}

TEST(StageTime, NoOverlapNoComm) {
  Cluster c = handCluster();
  InterferenceTable it(c);
  StageKnobs k;
  k.layers = 4;
  k.gradAccum = 8;
  StageEstimate e = estimateStage(k, handNumbers(), c, it);
  EXPECT_NEAR(e.t, 4 * (1e-3 + 2e-3), 1e-12);
  // The first forward also runs each layer's optimizer step and zeroes its gradients.
  EXPECT_NEAR(e.d, 4 * stepSeconds, 1e-12);
}

TEST(StageTime, TheFirstForwardStepsThePreAndPostWeightsToo) {
  Cluster c = handCluster();
  InterferenceTable it(c);
  StageNumbers n = handNumbers();
  n.pre.params = 3e6;      // embeddings
  n.post.params = 5e3;     // the final norm
  n.post.tiedParams = 2e6; // the last stage's copy of a tied head
  StageKnobs k;
  k.layers = 4;
  k.gradAccum = 8;
  k.first = k.last = true; // one stage: the tied head is the embedding itself
  StageEstimate whole = estimateStage(k, n, c, it);
  EXPECT_NEAR(whole.d, (4e6 + 3e6 + 5e3) * stepSeconds / 1e6, 1e-12);
  EXPECT_NEAR(whole.fwdFirst.busy[0] - whole.fwdStable.busy[0], whole.d, 1e-12);
  // (d below also holds the last backward's reductions: compare the steps)
  auto steps = [&] {
    StageEstimate e = estimateStage(k, n, c, it);
    return e.fwdFirst.busy[0] - e.fwdStable.busy[0];
  };
  k.first = false; // a pipeline's last stage steps its own copy of the head
  EXPECT_NEAR(steps(), (4e6 + 5e3 + 2e6) * stepSeconds / 1e6, 1e-12);
  k.zero.optimizer = true; // sharded over dp 2
  k.dp = 2;
  // (the gradients stay whole: each rank zeroes all of them)
  EXPECT_NEAR(steps(), (4e6 + 5e3 + 2e6) * (adamSeconds / 2 + clearSeconds) / 1e6, 1e-12);
  k.zero.grads = true; // ZeRO-2: each rank sums only its slice
  EXPECT_NEAR(steps(), (4e6 + 5e3 + 2e6) / 2 * stepSeconds / 1e6, 1e-12);
}

TEST(StageTime, CheckpointedLayersRecompute) {
  Cluster c = handCluster();
  InterferenceTable it(c);
  StageKnobs k;
  k.layers = 4;
  k.ckpt = 3;
  k.gradAccum = 8;
  StageEstimate e = estimateStage(k, handNumbers(), c, it);
  EXPECT_NEAR(e.t, 4 * 3e-3 + 3 * 1e-3, 1e-12);
}

TEST(StageTime, OffloadFullyHiddenBehindCompute) {
  // Offloading all activations: 100 MB at 10 GB/s = 10 ms per layer, longer
  // than compute, so each layer takes the transfer time; compute hides.
  Cluster c = handCluster();
  InterferenceTable it(c);
  StageKnobs k;
  k.layers = 2;
  k.gradAccum = 4;
  k.offload.activations = 1;
  StageEstimate e = estimateStage(k, handNumbers(), c, it);
  double swap = 100e6 / 10e9;
  // Forward: layer 0 computes (1 ms); layer 1 computes while layer 0's
  // activations go out (10 ms); then layer 1's go out, exposed (10 ms).
  // Backward: layer 1's come in, exposed; layer 1 computes (2 ms) while
  // layer 0's come in (10 ms); layer 0 computes, nothing beside it.
  EXPECT_NEAR(e.fwdStable.elapsed, 1e-3 + swap + swap, 1e-12);
  EXPECT_NEAR(e.bwdStable.elapsed, swap + swap + 2e-3, 1e-12);
  EXPECT_NEAR(e.fwdStable.busy[0], 2 * 1e-3, 1e-15);
}

TEST(StageTime, EachLayersTransferIsCountedOnce) {
  // Three layers whose swap-out (10 ms) outlasts their forward (1 ms): the
  // forward is one compute, then three transfers back to back. (It once
  // counted every layer's transfer plus the last one again: 40 ms.)
  Cluster c = handCluster();
  InterferenceTable it(c);
  StageKnobs k;
  k.layers = 3;
  k.gradAccum = 4;
  k.offload.activations = 1;
  StageEstimate e = estimateStage(k, handNumbers(), c, it);
  double swap = 100e6 / 10e9;
  EXPECT_NEAR(e.fwdStable.elapsed, 1e-3 + 3 * swap, 1e-12);
  EXPECT_NEAR(e.bwdStable.elapsed, 3 * swap + 2e-3, 1e-12);
}

/// The hand cluster with collectives at 0.1 GB/s, so a layer's gradient
/// reduction over dp 4 outlasts its backward.
Cluster slowCollectivesCluster() {
  Cluster c = handCluster();
  c.collectives = {{1, 8, 0.1, 0}, {1, 4, 0.1, 0}, {1, 2, 0.1, 0}};
  return c;
}

/// `layers` layers of handNumbers() on dp 4 (one node), G micro-batches.
StageKnobs dp4Knobs(int layers, int gradAccum) {
  StageKnobs k;
  k.layers = layers;
  k.dp = 4;
  k.meshGpusPerNode = 4;
  k.gradAccum = gradAccum;
  return k;
}

TEST(StageTime, ZeroGradientReductionsOverlapTheNextLayersBackward) {
  // ZeRO-2 on dp 4: each layer's fp32 gradients (4 MB) are reduce-scattered
  // after its backward, (3/4) * 4 MB at 0.1 GB/s = 30 ms, longer than the
  // 2 ms backward. Two layers: layer 1's backward, then layer 0's backward
  // beside layer 1's reduction, then layer 0's reduction: 2 + 30 + 30 ms.
  const Cluster c = slowCollectivesCluster();
  InterferenceTable it(c);
  StageKnobs k = dp4Knobs(2, 4);
  k.zero.optimizer = k.zero.grads = true;
  StageEstimate e = estimateStage(k, handNumbers(), c, it);
  const double scatter = 0.75 * 4e6 / 0.1e9;
  ASSERT_NEAR(e.bwdStable.busy[1], 2 * scatter, 1e-12);
  // (each backward first zeroes its layer's 4 MB of gradients, folded layer by layer)
  EXPECT_NEAR(e.bwdStable.elapsed, 2e-3 + clearSeconds + 2 * scatter, 1e-12);
}

TEST(StageTime, GradientsFoldedRegionByRegionAreZeroedInEachBackward) {
  // Summed in place (no ZeRO-2, no offload), a layer's gradients are zeroed
  // once a step; folded region by region (ZeRO-2 on dp > 1, an offloaded
  // sum), its buffers are made zeroed before each backward: 4 MB a layer.
  Cluster c = handCluster();
  InterferenceTable it(c);
  StageKnobs k;
  k.layers = 3;
  k.gradAccum = 8;
  auto backwardCompute = [&] { return estimateStage(k, handNumbers(), c, it).bwdStable.busy[0]; };
  EXPECT_NEAR(backwardCompute(), 3 * 2e-3, 1e-12);
  k.zero = ZeroFlags::ofLevel(2); // on one rank nothing is sliced: still in place
  EXPECT_NEAR(backwardCompute(), 3 * 2e-3, 1e-12);
  k.dp = 2;
  EXPECT_NEAR(backwardCompute(), 3 * (2e-3 + clearSeconds), 1e-12);
  k.zero = {};
  k.dp = 1;
  k.offload.grads = 0.5;
  EXPECT_NEAR(backwardCompute(), 3 * (2e-3 + clearSeconds), 1e-12);
  // The first stage's embedding, tied to the head, is summed whole: of pre's
  // 3e6 parameters only the 1e6 others are folded.
  StageNumbers n = handNumbers();
  n.pre.params = 3e6;
  n.post.tiedParams = 2e6;
  k.first = true;
  EXPECT_NEAR(estimateStage(k, n, c, it).bwdStable.busy[0],
              3 * (2e-3 + clearSeconds) + clearSeconds, 1e-12);
}

TEST(StageTime, GradientReductionsAfterTheBackwardAddToIt) {
  // The ZeRO-2 case above, last backward, all-reduce on dp 4 without ZeRO:
  // 2 * (3/4) * 4 MB at 0.1 GB/s = 60 ms a layer. Beside the backward
  // (overlap_grad_reduce, the default) three layers take 2 ms + 3 * 60 ms
  // (layer 0's backward hides under layer 1's reduction, layer 1's under
  // layer 2's); after it (Megatron-LM's local DDP), 3 * 2 ms + 3 * 60 ms.
  const Cluster c = slowCollectivesCluster();
  InterferenceTable it(c);
  StageKnobs k = dp4Knobs(3, 2);
  const double reduce = 2 * 0.75 * 4e6 / 0.1e9;
  StageEstimate beside = estimateStage(k, handNumbers(), c, it);
  EXPECT_NEAR(beside.bwdLast.elapsed, 2e-3 + 3 * reduce, 1e-12);
  k.overlapGradReduce = false;
  StageEstimate after = estimateStage(k, handNumbers(), c, it);
  EXPECT_NEAR(after.bwdLast.elapsed, 3 * 2e-3 + 3 * reduce, 1e-12);
  EXPECT_NEAR(after.bwdLast.busy[1], 3 * reduce, 1e-12); // the report's g2g row
  // Only the last backward: the other micro-batches reduce nothing.
  EXPECT_NEAR(after.bwdStable.elapsed, beside.bwdStable.elapsed, 1e-15);
  EXPECT_NEAR(after.bwdStable.elapsed, 3 * 2e-3, 1e-12);
}

TEST(StageTime, DataParallelGradientReductionFallsOnTheLastBackward) {
  Cluster c = handCluster();
  InterferenceTable it(c);
  StageKnobs k;
  k.layers = 1;
  k.dp = 4;
  k.meshGpusPerNode = 4;
  k.gradAccum = 2;
  StageEstimate e = estimateStage(k, handNumbers(), c, it);
  // All-reduce of 4 MB of fp32 grads over 4 GPUs at 100 GB/s: 2*(3/4)*4e6/1e11.
  double allReduce = 2 * 0.75 * 4e6 / 100e9;
  EXPECT_NEAR(e.bwdLast.busy[1], allReduce, 1e-15);
  EXPECT_NEAR(e.bwdStable.busy[1], 0, 1e-15);
  // The reduction overlaps the layer's backward compute, except for the
  // last layer reduced: nothing follows it, so it is exposed once.
  EXPECT_NEAR(e.d, stepSeconds + allReduce, 1e-12);
}

TEST(StageTime, TheGradientDtypeSetsTheDataParallelTraffic) {
  // bf16 gradients (grad_dtype = bf16) halve the gradient collectives; the
  // ZeRO-3 weight gathers move the bf16 weights either way.
  Cluster c = handCluster();
  StageNumbers fp32Grads = handNumbers(), bf16Grads = handNumbers();
  bf16Grads.layer.gradBytes = 2;
  StageKnobs k;
  k.layers = 1;
  k.dp = 4;
  k.meshGpusPerNode = 4;
  const StageConstants a = makeStageConstants(k, fp32Grads, c),
                       b = makeStageConstants(k, bf16Grads, c);
  EXPECT_DOUBLE_EQ(a.reduceGrads, 2 * 0.75 * 4e6 / 100e9);
  EXPECT_DOUBLE_EQ(b.reduceGrads, a.reduceGrads / 2);
  EXPECT_DOUBLE_EQ(b.scatterGrads, a.scatterGrads / 2);
  EXPECT_DOUBLE_EQ(b.gatherWeights, a.gatherWeights);
  EXPECT_DOUBLE_EQ(a.gatherWeights, 0.75 * 2e6 / 100e9);
}

TEST(Pipeline, OneStage) { EXPECT_DOUBLE_EQ(pipelineSeconds({2.0}, {0.5}, 8), 8 * 2.0 + 0.5); }

TEST(Pipeline, FourEqualStages) {
  // Fill (3 t) + G t + the first stage's extra (later stages' extras hide
  // behind the fill).
  EXPECT_DOUBLE_EQ(pipelineSeconds({1, 1, 1, 1}, {0.5, 0.5, 0.5, 2.5}, 8), 4 + 7 + 0.5);
  // Stage 3's extra 4.0 exceeds the 3 s fill before it by 1.0.
  EXPECT_DOUBLE_EQ(pipelineSeconds({1, 1, 1, 1}, {0.5, 0.5, 0.5, 4.0}, 8), 4 + 7 + 1.0);
}

// Interleaved 1F1B with v chunks per stage: the fill and drain shrink by v,
// Megatron-LM's (G + (S - 1) / v) t for equal stages.
TEST(Pipeline, InterleavedFillShrinksByTheChunks) {
  EXPECT_DOUBLE_EQ(pipelineSeconds({1, 1, 1, 1}, {0, 0, 0, 0}, 8, 2), 8 + 3.0 / 2);
  EXPECT_DOUBLE_EQ(pipelineSeconds({1, 1, 1, 1}, {0, 0, 0, 0}, 8, 1),
                   pipelineSeconds({1, 1, 1, 1}, {0, 0, 0, 0}, 8));
  // Stage 3's extra 4.0 is hidden by a fill of 3 / 2 only: 2.5 shows.
  EXPECT_DOUBLE_EQ(pipelineSeconds({1, 1, 1, 1}, {0, 0, 0, 4.0}, 8, 2), 8 + 1.5 + 2.5);
  // Unequal stages: sum / v + (G - 1/v) max.
  EXPECT_DOUBLE_EQ(pipelineSeconds({1, 2}, {0, 0}, 4, 3), 3.0 / 3 + (4 - 1.0 / 3) * 2);
}

// Stage i holds S - i micro-batches under 1F1B (at most G); interleaved,
// Megatron-LM's warm-up (S - i - 1) * 2 + (v - 1) * S chunk forwards plus
// the current one, a v-th of the stage each, rounded up (at most G * v).
TEST(Pipeline, InflightMicroBatches) {
  EXPECT_EQ(inflightMicroBatches(0, 4, 8), 4);
  EXPECT_EQ(inflightMicroBatches(3, 4, 8), 1);
  EXPECT_EQ(inflightMicroBatches(0, 4, 2), 2);
  EXPECT_EQ(inflightMicroBatches(0, 4, 8, 2), 6); // (6 + 4 + 1) / 2 = 5.5
  EXPECT_EQ(inflightMicroBatches(3, 4, 8, 2), 3); // (0 + 4 + 1) / 2 = 2.5
  EXPECT_EQ(inflightMicroBatches(0, 4, 4, 3), 4); // 6 + 8 + 1 = 15 chunks, but at most G v = 12
  EXPECT_EQ(inflightMicroBatches(0, 2, 1, 2), 1); // at most G * v = 2 chunks
}

TEST(Pipeline, SingleMicroBatch) {
  Cluster c = handCluster();
  InterferenceTable it(c);
  StageKnobs k;
  k.layers = 2;
  k.gradAccum = 1;
  StageEstimate e = estimateStage(k, handNumbers(), c, it);
  EXPECT_DOUBLE_EQ(e.d, 0);
  EXPECT_NEAR(e.t, 2 * 3e-3 + 2 * stepSeconds, 1e-12);
  EXPECT_DOUBLE_EQ(pipelineSeconds({e.t, e.t}, {0, 0}, 1), 2 * e.t);
}

TEST(StageMemory, ZeroLevelsAndOffload) {
  Cluster c = handCluster();
  InterferenceTable it(c);
  StageNumbers n = handNumbers();
  StageKnobs k;
  k.layers = 2;
  k.dp = 4;
  k.meshGpusPerNode = 4;
  k.gradAccum = 4;
  k.inflight = 1;
  const double P = 2e6; // parameters of the stage's two layers
  auto mem = [&](ZeroFlags z, OffloadRatios o) {
    k.zero = z;
    k.offload = o;
    return estimateStage(k, n, c, it).mem;
  };
  MemoryBreakdown none = mem({}, {});
  EXPECT_DOUBLE_EQ(none.weights, 2 * P);
  EXPECT_DOUBLE_EQ(none.grads, 4 * P); // fp32 gradients of bf16 weights
  EXPECT_DOUBLE_EQ(none.optimizer, 12 * P);
  EXPECT_DOUBLE_EQ(none.buffers, 0);
  MemoryBreakdown z1 = mem({false, false, true}, {});
  EXPECT_DOUBLE_EQ(z1.optimizer, 12 * P / 4);
  EXPECT_DOUBLE_EQ(z1.buffers, 0);
  MemoryBreakdown z2 = mem({false, true, true}, {});
  EXPECT_DOUBLE_EQ(z2.grads, 4 * P / 4);
  EXPECT_DOUBLE_EQ(z2.buffers, 2 * 4 * 1e6); // double-buffered full layer grads
  MemoryBreakdown z3 = mem({true, true, true}, {});
  EXPECT_DOUBLE_EQ(z3.weights, 2 * P / 4);
  EXPECT_DOUBLE_EQ(z3.buffers, 2 * 2 * 1e6 + 2 * 4 * 1e6); // and weights
  MemoryBreakdown off = mem({false, false, true}, {0.5, 0.25, 0.75, 0});
  EXPECT_DOUBLE_EQ(off.weights, 2 * P * 0.5);
  EXPECT_DOUBLE_EQ(off.grads, 4 * P * 0.75);
  EXPECT_DOUBLE_EQ(off.optimizer, 12 * P / 4 * 0.25);
  // Gathered weights and gradients, double-buffered, and the staging of one
  // layer's offloaded optimizer state (its host part only: 0.75 of it).
  EXPECT_DOUBLE_EQ(off.buffers, 2 * 2e6 + 2 * 4e6 + 0.75 * 12 * 1e6 / 4);
}

/// A GPT trained in bf16 and in fp32 (`gpt(...)` arguments, sequence
/// length), compiled and profiled.
struct DtypePair {
  std::unique_ptr<Compiled> bf16Module, fp32Module;
  std::optional<ModelProfile> bf16, fp32;
};
DtypePair profileBothDtypes(const std::string &gptArgs, int seqLen) {
  auto source = [&](const char *dtype) {
    return "import \"gpt\"\nmodel m = gpt(" + gptArgs +
           ")\ntrain {\n  global_batch = 16\n  seq_len = " + std::to_string(seqLen) + "\n" + dtype +
           "  optimizer = adamw(lr = 1e-3, betas = (0.9, 0.95), weight_decay = 0.1)\n}\n";
  };
  DtypePair d;
  d.bf16Module = compile(source(""));
  d.fp32Module = compile(source("  dtype = f32\n"));
  EXPECT_TRUE(d.bf16Module->module) << d.bf16Module->diagText;
  EXPECT_TRUE(d.fp32Module->module) << d.fp32Module->diagText;
  if (d.bf16Module->module && d.fp32Module->module) {
    d.bf16 = ModelProfile::build(*d.bf16Module->module, d.bf16Module->diag);
    d.fp32 = ModelProfile::build(*d.fp32Module->module, d.fp32Module->diag);
  }
  return d;
}

TEST(StageMemory, TheTrainingDtypeSetsTheBytesPerParameter) {
  // bf16 weights with fp32 gradients, masters and moments: 2 + 4 + 12
  // bytes; fp32 training keeps no separate masters: 4 + 4 + 8 bytes, and
  // activations twice as large.
  DtypePair d = profileBothDtypes("vocab = 256, hidden = 64, layers = 2, heads = 4", 64);
  ASSERT_TRUE(d.bf16 && d.fp32);
  const ModelProfile *mpBf16 = &*d.bf16, *mpFp32 = &*d.fp32;
  Cluster c = handCluster();
  RegionNumbers a = mpBf16->evaluate(RegionKind::Layer, 2, 1, c),
                b = mpFp32->evaluate(RegionKind::Layer, 2, 1, c);
  EXPECT_DOUBLE_EQ(a.paramBytes, 2);
  EXPECT_DOUBLE_EQ(a.gradBytes, 4);
  EXPECT_DOUBLE_EQ(a.stateBytes, 12);
  EXPECT_DOUBLE_EQ(b.paramBytes, 4);
  EXPECT_DOUBLE_EQ(b.gradBytes, 4);
  EXPECT_DOUBLE_EQ(b.stateBytes, 8);
  // Float activations double; the few integer ones (token ids) do not.
  EXPECT_GT(b.savedFull, 1.98 * a.savedFull);
  EXPECT_LT(b.savedFull, 2 * a.savedFull);
  InterferenceTable it(c);
  StageKnobs k;
  k.layers = 2;
  k.inflight = 1;
  k.gradAccum = 1;
  StageNumbers nb{a, mpBf16->evaluate(RegionKind::Pre, 2, 1, c),
                  mpBf16->evaluate(RegionKind::Post, 2, 1, c)};
  StageNumbers nf{b, mpFp32->evaluate(RegionKind::Pre, 2, 1, c),
                  mpFp32->evaluate(RegionKind::Post, 2, 1, c)};
  MemoryBreakdown mb = estimateStage(k, nb, c, it).mem, mf = estimateStage(k, nf, c, it).mem;
  EXPECT_DOUBLE_EQ(mf.weights, 2 * mb.weights);
  EXPECT_DOUBLE_EQ(mf.grads, mb.grads);
  EXPECT_DOUBLE_EQ(mf.optimizer, mb.optimizer * 8 / 12);
}

TEST(StageMemory, APipelinesLastStageHoldsItsOwnCopyOfTheTiedEmbedding) {
  // GPT's LM head reads the token embedding pre declares: one stage holds it
  // once (as pre's), a pipeline's last stage a second copy with its
  // gradient and optimizer state, which the trainer keeps and sums with the
  // first stage's.
  DtypePair d = profileBothDtypes("vocab = 256, hidden = 64, layers = 2, heads = 4", 64);
  ASSERT_TRUE(d.bf16);
  Cluster c = handCluster();
  StageNumbers n{d.bf16->evaluate(RegionKind::Layer, 2, 2, c),
                 d.bf16->evaluate(RegionKind::Pre, 2, 2, c),
                 d.bf16->evaluate(RegionKind::Post, 2, 2, c)};
  EXPECT_DOUBLE_EQ(n.post.tiedParams, 256 * 64 / 2); // the vocabulary split over tp 2
  EXPECT_DOUBLE_EQ(n.post.params, 2 * 64);           // the final norm
  EXPECT_DOUBLE_EQ(n.pre.tiedParams, 0);
  InterferenceTable it(c);
  StageKnobs k;
  k.layers = 1;
  k.inflight = 1;
  k.gradAccum = 1;
  k.last = true;
  k.first = true;
  MemoryBreakdown whole = estimateStage(k, n, c, it).mem;
  k.first = false;
  MemoryBreakdown last = estimateStage(k, n, c, it).mem;
  EXPECT_DOUBLE_EQ(whole.weights, 2 * (n.layer.params + n.pre.params + n.post.params));
  EXPECT_DOUBLE_EQ(last.weights, 2 * (n.layer.params + n.post.params + n.post.tiedParams));
  EXPECT_DOUBLE_EQ(last.optimizer, 12 * (n.layer.params + n.post.params + n.post.tiedParams));
}

TEST(StageTime, APipelinesEndStagesSumTheTiedEmbeddingInTheirLastBackward) {
  // One stage reduces the embedding's gradient with pre's over dp; a
  // pipeline's first and last stages each wait for the all-reduce of their
  // copies over both stages' ranks instead, in their last backward.
  DtypePair d = profileBothDtypes("vocab = 4096, hidden = 256, layers = 2, heads = 4", 64);
  ASSERT_TRUE(d.bf16);
  Cluster c = handCluster();
  StageNumbers n{d.bf16->evaluate(RegionKind::Layer, 2, 1, c),
                 d.bf16->evaluate(RegionKind::Pre, 2, 1, c),
                 d.bf16->evaluate(RegionKind::Post, 2, 1, c)};
  ASSERT_DOUBLE_EQ(n.post.tiedParams, 4096 * 256);
  StageKnobs k;
  k.layers = 1;
  k.dp = 1;
  k.inflight = 1;
  k.gradAccum = 1;
  k.first = k.last = true;
  const StageConstants whole = makeStageConstants(k, n, c);
  EXPECT_DOUBLE_EQ(whole.reducePre, 0); // dp 1: nothing to reduce
  EXPECT_DOUBLE_EQ(whole.reducePost, 0);
  // hand() is one node: the sum runs over its two GPUs there.
  const double tiedSum =
      collectiveSeconds(c, Collective::AllReduce, 4.0 * 4096 * 256, 1, 2); // fp32 gradients
  EXPECT_GT(tiedSum, 0);
  k.last = false;
  EXPECT_DOUBLE_EQ(makeStageConstants(k, n, c).reducePre, tiedSum);
  k.first = false;
  k.last = true;
  EXPECT_DOUBLE_EQ(makeStageConstants(k, n, c).reducePost, tiedSum);
}

TEST(ModelProfile, OpsThatForwardTheirOperandCostNothing) {
  // tp_copy, dropout at p = 0 and all_reduce at tp = 1 run no kernel in the
  // trainer (their result is their operand's buffer): they are not priced,
  // and a result shares its operand's bytes in the liveness.
  DtypePair d = profileBothDtypes("vocab = 256, hidden = 64, layers = 2, heads = 4", 64);
  ASSERT_TRUE(d.bf16);
  for (const RegionProfile *r :
       {&d.bf16->region(RegionKind::Pre), &d.bf16->region(RegionKind::Layer),
        &d.bf16->region(RegionKind::Post)})
    for (const std::vector<OpProfile> *ops : {&r->fwd, &r->bwd})
      for (const OpProfile &op : *ops) {
        // (Sequence parallelism's all-gathers take tp_copy's place.)
        EXPECT_TRUE(op.kind != OpKind::TpCopy || op.onlyUnderSp) << op.name;
        EXPECT_NE(op.kind, OpKind::Dropout) << op.name;
        EXPECT_NE(op.kind, OpKind::DropoutGrad) << op.name;
      }
  // At tp = 1 all_reduce forwards its operand too: the layer's forward peak
  // (at the row-parallel output) holds one [b, s, hidden] bf16 activation
  // less than the same liveness with all_reduce writing a second buffer.
  const RegionProfile &layer = d.bf16->region(RegionKind::Layer);
  auto peakAtTp1 = [](const std::vector<Poly> &cands) {
    double best = 0;
    for (const Poly &p : cands)
      best = std::max(best, p.eval(2, 1));
    return best;
  };
  const double activation = 2.0 * 64 * 64 * 2; // b = 2, s = 64, hidden = 64, bf16
  EXPECT_DOUBLE_EQ(peakAtTp1(layer.memory.fwdPeakFull) - peakAtTp1(layer.memoryAtTp1.fwdPeakFull),
                   activation);
  Cluster c = handCluster();
  EXPECT_DOUBLE_EQ(d.bf16->evaluate(RegionKind::Layer, 2, 1, c).fwdPeakFull,
                   peakAtTp1(layer.memoryAtTp1.fwdPeakFull));
}

TEST(StageTime, Fp32TrainingPricesMatmulsAtTheTf32Peak) {
  // The trainer runs fp32 training's GEMMs as TF32: the roofline prices
  // their FLOPs at the TF32 peak (half the bf16 peak unless the cluster
  // says), and bf16 training at the bf16 peak whatever the TF32 figure.
  DtypePair d = profileBothDtypes("vocab = 1024, hidden = 1024, layers = 2, heads = 8", 1024);
  ASSERT_TRUE(d.bf16 && d.fp32);
  const ModelProfile *mpBf16 = &*d.bf16, *mpFp32 = &*d.fp32;
  Cluster halfRate = handCluster(), fullRate = handCluster();
  fullRate.device.tf32PeakTflops = fullRate.device.peakTflops;
  auto layerTime = [](const ModelProfile &mp, const Cluster &c) {
    RegionNumbers n = mp.evaluate(RegionKind::Layer, 2, 1, c);
    return n.fwdCompute + n.bwdCompute;
  };
  EXPECT_DOUBLE_EQ(layerTime(*mpBf16, halfRate), layerTime(*mpBf16, fullRate));
  // The layer's large GEMMs are compute-bound: at half the rate they take
  // about twice as long, so the layer takes well over 1.5 times as long.
  EXPECT_GT(layerTime(*mpFp32, halfRate), 1.5 * layerTime(*mpFp32, fullRate));
}

TEST(StageMemory, ActivationsOfInFlightMicroBatches) {
  Cluster c = handCluster();
  InterferenceTable it(c);
  StageNumbers n = handNumbers();
  StageKnobs k;
  k.layers = 3;
  k.ckpt = 1;
  k.inflight = 4; // stage 0 of 4
  k.last = false;
  k.gradAccum = 8;
  MemoryBreakdown m = estimateStage(k, n, c, it).mem;
  double perMicroBatch = 2 * 100e6 + 1 * 10e6;
  double before = 2 * 100e6; // the first two layers are not checkpointed
  double states = 18 * 3e6;  // 2 + 4 + 12 bytes per parameter
  EXPECT_DOUBLE_EQ(m.savedActivations, 3 * perMicroBatch + before);
  // The last layer is checkpointed: forward keeps its working set of 30 MB;
  // backward recomputes (120 MB + the 10 MB incoming gradient) vs 150 MB.
  EXPECT_DOUBLE_EQ(m.fwdPeak, states + 3 * perMicroBatch + before + 30e6);
  EXPECT_DOUBLE_EQ(m.bwdPeak, states + 3 * perMicroBatch + before + 150e6);
  k.offload.activations = 0.5;
  MemoryBreakdown half = estimateStage(k, n, c, it).mem;
  EXPECT_DOUBLE_EQ(half.savedActivations, 0.5 * (3 * perMicroBatch + before) + 0.5 * 100e6);
}

TEST(StageMemory, PinnedHostMemoryOfOffloads) {
  Cluster c = handCluster();
  InterferenceTable it(c);
  StageNumbers n = handNumbers();
  StageKnobs k;
  k.layers = 3;
  k.ckpt = 1;
  k.dp = 4;
  k.meshGpusPerNode = 4;
  k.inflight = 4;
  k.last = false;
  k.gradAccum = 8;
  k.zero = {false, false, true};
  k.offload = {0.5, 0.25, 0.75, 0.5};
  const double P = 3e6;
  double perMicroBatch = 2 * 100e6 + 1 * 10e6, before = 2 * 100e6;
  MemoryBreakdown m = estimateStage(k, n, c, it).mem;
  double state = 2 * P * 0.5 + 4 * P * 0.25 + 12 * P / 4 * 0.75;
  EXPECT_DOUBLE_EQ(m.hostPerInflight, 0.5 * perMicroBatch);
  EXPECT_DOUBLE_EQ(m.host, state + 0.5 * (3 * perMicroBatch + before));
  EXPECT_TRUE(estimateStage(k, n, c, it).fits); // no host limit given
  // 8 GPUs share the node's pinnable memory: 0.25 GiB each is not enough
  // for the 0.39 GiB this GPU offloads.
  c.hostMemoryGiB = 2;
  EXPECT_FALSE(estimateStage(k, n, c, it).fits);
  c.hostMemoryGiB = 8 * m.host / (1ull << 30);
  EXPECT_TRUE(estimateStage(k, n, c, it).fits);
  // The batched evaluator agrees, and reports the growth per micro-batch.
  StageContext ctx{3, 1, 4, 1, 1, 4, true, false, 4, 8};
  StrategyBatch batch;
  batch.add(k.zero, k.offload, 1);
  std::vector<StrategyResult> r(1);
  StageEvaluator(n, c, ctx).evaluate(batch, r);
  EXPECT_DOUBLE_EQ(r[0].hostBytes, m.host);
  EXPECT_DOUBLE_EQ(r[0].hostPerInflightBytes, m.hostPerInflight);
  EXPECT_TRUE(r[0].fits);
}

TEST(ModelProfile, LayerActivationsMatchTheCostModelClosedForm) {
  auto c = compileFile(std::string(MIST_EXAMPLES_DIR) + "/gpt3-1.3b.mist");
  ASSERT_TRUE(c->module) << c->diagText;
  auto mp = ModelProfile::build(*c->module, c->diag);
  ASSERT_TRUE(mp) << c->diagText;
  Cluster cl = handCluster();
  const double s = 2048, h = 2048, a = 16;
  for (int b : {1, 4})
    for (int tp : {1, 2, 8}) {
      RegionNumbers n = mp->evaluate(RegionKind::Layer, b, tp, cl);
      EXPECT_DOUBLE_EQ(n.savedFull, s * b * h * (8 + 24.0 / tp) + 4 * b * a * s / tp + 16 * b * s);
      EXPECT_DOUBLE_EQ(n.savedCkpt, 2 * b * s * h); // the layer input
      EXPECT_DOUBLE_EQ(n.params, 12 * h * h / tp + 7 * h / tp + 6 * h);
      EXPECT_DOUBLE_EQ(n.fwdFlops, 24 * b * s * h * h / tp + 4 * b * s * s * h / tp);
      EXPECT_GE(n.fwdPeakFull, n.savedFull); // saved values are live at the end of forward
      EXPECT_GE(n.bwdPeak, n.savedFull);
    }
  // 50304 and 3*2048 divide by 3, 16 heads do not.
  EXPECT_EQ(mp->violatedAssumption(3).value_or(""), "heads % tp == 0");
  EXPECT_FALSE(mp->violatedAssumption(8).has_value());
}

} // namespace

namespace {

TEST(Evaluator, MatchesTheFullEstimateForEveryStrategy) {
  auto c = compileFile(std::string(MIST_EXAMPLES_DIR) + "/gpt3-1.3b.mist");
  ASSERT_TRUE(c->module) << c->diagText;
  auto mp = ModelProfile::build(*c->module, c->diag);
  ASSERT_TRUE(mp) << c->diagText;
  Cluster cl = handCluster();
  cl.interference = {{{Stream::Compute, Stream::H2D}, {1.1, 1.3}}};
  StageContext ctx;
  ctx.layers = 6;
  ctx.microBatch = 2;
  ctx.dp = 2;
  ctx.tp = 2;
  ctx.meshGpusPerNode = 4;
  ctx.first = true;
  ctx.last = false;
  ctx.inflight = 3;
  ctx.gradAccum = 4;
  StrategyBatch batch;
  for (bool zw : {false, true})
    for (double wo : {0.0, 0.5})
      for (double ao : {0.0, 0.25, 1.0})
        for (int ck = 0; ck <= ctx.layers; ++ck)
          batch.add({zw, zw, true}, {wo, wo, 0.5, ao}, ck);
  std::vector<StrategyResult> fast(batch.size());
  StageEvaluator(*mp, cl, ctx).evaluate(batch, fast);
  InterferenceTable it(cl);
  StageNumbers n{mp->evaluate(RegionKind::Layer, 2, 2, cl), mp->evaluate(RegionKind::Pre, 2, 2, cl),
                 mp->evaluate(RegionKind::Post, 2, 2, cl)};
  for (size_t i = 0; i < batch.size(); ++i) {
    StageKnobs k;
    k.layers = ctx.layers;
    k.microBatch = 2;
    k.dp = 2;
    k.tp = 2;
    k.meshGpusPerNode = 4;
    k.first = true;
    k.last = false;
    k.inflight = 3;
    k.gradAccum = 4;
    k.zero = batch[i].zero;
    k.offload = batch[i].offload;
    k.ckpt = batch[i].ckpt;
    StageEstimate e = estimateStage(k, n, cl, it);
    EXPECT_DOUBLE_EQ(fast[i].t, e.t) << i;
    EXPECT_DOUBLE_EQ(fast[i].d, e.d) << i;
    EXPECT_DOUBLE_EQ(fast[i].peakBytes, e.mem.peak()) << i;
    EXPECT_EQ(fast[i].fits, e.fits) << i;
  }
}

} // namespace

TEST(ModelProfile, MeasuredOpTimesReplaceTheRoofline) {
  auto c = compileFile(std::string(MIST_EXAMPLES_DIR) + "/tiny-gpt.mist");
  ASSERT_TRUE(c->module) << c->diagText;
  auto mp = ModelProfile::build(*c->module, c->diag);
  ASSERT_TRUE(mp) << c->diagText;
  Cluster cl = handCluster();
  const int b = 2, tp = 1;
  RegionNumbers roofline = mp->evaluate(RegionKind::Layer, b, tp, cl);
  // The shape key of the layer's first linear: operand shapes at (b, tp).
  const OpProfile *linear = nullptr;
  for (const OpProfile &op : mp->region(RegionKind::Layer).fwd)
    if (op.kind == OpKind::Linear && !linear)
      linear = &op;
  ASSERT_TRUE(linear);
  std::string key;
  for (size_t i = 0; i < linear->operandShapes.size(); ++i) {
    key += i ? "," : "";
    for (size_t j = 0; j < linear->operandShapes[i].size(); ++j)
      key += (j ? "x" : "") +
             std::to_string(static_cast<long long>(linear->operandShapes[i][j].eval(b, tp)));
  }
  double flopRate = cl.device.peakTflops * 1e12 * cl.device.matmulEfficiency;
  double byteRate = cl.device.memBandwidthGBs * 1e9 * cl.device.memEfficiency;
  double rooflineTime = std::max(linear->flops.eval(b, tp) * linear->flopDiscount / flopRate,
                                 linear->bytes.eval(b, tp) / byteRate);
  int sameShape = 0; // every linear with that shape key takes the measured time
  for (const OpProfile &op : mp->region(RegionKind::Layer).fwd) {
    if (op.kind != OpKind::Linear || op.operandShapes.size() != linear->operandShapes.size())
      continue;
    bool same = true;
    for (size_t i = 0; i < op.operandShapes.size(); ++i)
      for (size_t j = 0; j < op.operandShapes[i].size(); ++j)
        same &= j < linear->operandShapes[i].size() &&
                op.operandShapes[i][j].eval(b, tp) == linear->operandShapes[i][j].eval(b, tp);
    sameShape += same;
  }
  cl.device.measured.push_back({"linear", key, 5e-3});
  RegionNumbers measured = mp->evaluate(RegionKind::Layer, b, tp, cl);
  EXPECT_NEAR(measured.fwdCompute - roofline.fwdCompute, sameShape * (5e-3 - rooflineTime), 1e-12);
  EXPECT_DOUBLE_EQ(measured.bwdCompute, roofline.bwdCompute); // linear_grad is not in the table
  EXPECT_GE(sameShape, 1);
}
