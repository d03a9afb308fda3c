//===- TrainerPartsTest.cpp - Stage memory, offload engine, stash ---------===//
#include "runtime/trainer/ActivationStash.h"
#include "runtime/trainer/OffloadEngine.h"
#include "runtime/trainer/StageMemory.h"
#include "schedule/Schedule.h"

#include <gtest/gtest.h>
#include <numeric>

using namespace mist::rt;

namespace {
DeviceTensor onDevice(const std::vector<float> &values, DType type = DType::F32) {
  DeviceTensor d(type);
  d.upload(values);
  return d;
}
std::vector<float> hostValues(const HostBytes &h) {
  const float *at = reinterpret_cast<const float *>(h.data());
  return std::vector<float>(at, at + h.size() / sizeof(float));
}
} // namespace

TEST(OffloadEngine, SwapsTheTailOutAndBackIntact) {
  OffloadEngine engine;
  std::vector<float> values(10);
  std::iota(values.begin(), values.end(), 0.f);
  DeviceTensor device = onDevice(values);
  HostBytes host;
  engine.swapOut(device, host, 0.35); // floor(3.5) = 3 values leave
  EXPECT_EQ(device.size(), 7u);
  EXPECT_EQ(hostValues(host), (std::vector<float>{7, 8, 9}));
  EXPECT_EQ(engine.hostBytes(), 12u);
  engine.swapIn(device, host);
  EXPECT_TRUE(host.empty());
  EXPECT_EQ(device.download(), values);
  EXPECT_EQ(engine.hostBytes(), 0u);
  EXPECT_EQ(engine.peakHostBytes(), 12u);
  EXPECT_EQ(engine.movedBytes(), 24u);
}

TEST(OffloadEngine, FractionsZeroAndOneMoveNothingOrEverything) {
  OffloadEngine engine;
  DeviceTensor device = onDevice(std::vector<float>(4, 1.f));
  HostBytes host;
  engine.swapOut(device, host, 0.0);
  EXPECT_EQ(device.size(), 4u);
  EXPECT_TRUE(host.empty());
  engine.swapOut(device, host, 1.0);
  EXPECT_TRUE(device.empty());
  EXPECT_EQ(host.size(), 16u);
  engine.swapIn(device, host);
  EXPECT_EQ(device.download(), std::vector<float>(4, 1.f));
}

TEST(OffloadEngine, CopiesOutAndInPlace) {
  OffloadEngine engine;
  DeviceTensor device = onDevice({1, 2, 3, 4});
  HostBytes host;
  engine.copyOut(device.at(2).data, 2 * sizeof(float), host);
  device::fill(device.f32() + 2, 2, 0.f);
  engine.copyIn(device.at(2).data, host);
  EXPECT_EQ(device.download(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(engine.hostBytes(), 0u);
}

TEST(OffloadEngine, MovesTwoBytesPerBf16Element) {
  OffloadEngine engine;
  // 1 + 2^-7 is a bf16 value; 1 + 2^-9 rounds to 1 (to nearest even).
  DeviceTensor device = onDevice({1.f, 1.f + 1.f / 128, 1.f + 1.f / 512, -3.f}, DType::BF16);
  HostBytes host;
  engine.swapOut(device, host, 0.5);
  EXPECT_EQ(device.size(), 2u);
  EXPECT_EQ(device.bytes(), 4u);
  EXPECT_EQ(engine.hostBytes(), 4u);
  engine.swapIn(device, host);
  EXPECT_EQ(device.download(), (std::vector<float>{1.f, 1.f + 1.f / 128, 1.f, -3.f}));
  EXPECT_EQ(engine.movedBytes(), 8u);
}

TEST(ActivationStash, MaxInFlightFollowsTheOneFOneBOrder) {
  // Stage 0 of 3 with G = 4: F0 F1 F2 B0 F3 B1 B2 B3 keeps three in flight.
  const std::vector<mist::ScheduledRun> first{{0, 0, true},  {1, 0, true}, {2, 0, true},
                                              {0, 0, false}, {3, 0, true}, {1, 0, false},
                                              {2, 0, false}, {3, 0, false}};
  EXPECT_EQ(ActivationStash::maxInFlight(first), 3);
  EXPECT_EQ(ActivationStash::maxInFlight(mist::interleavedOneFOneB(0, 3, 4, 1)), 3);
  // Interleaved, a micro-batch is in flight from its chunk-0 forward to its
  // chunk-0 backward: stage 0 of 2 with 2 chunks and G = 4 runs F0.0 F1.0
  // F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 ...: 4 at once.
  EXPECT_EQ(ActivationStash::maxInFlight(mist::interleavedOneFOneB(0, 2, 4, 2)), 4);
  const std::vector<mist::ScheduledRun> last{
      {0, 0, true}, {0, 0, false}, {1, 0, true}, {1, 0, false}};
  EXPECT_EQ(ActivationStash::maxInFlight(last), 1);
}

namespace {

/// A two-layer stage: buffer 0 the layer's weight, 1 its gradient, 2 the
/// layer input, 3 an activation the forward writes and the backward reads,
/// 4 a buffer only the backward uses, 5 the tokens, 6 an intermediate of the
/// forward that the backward does not read.
StageSpec tinyStage(int ckptLayers, double offloadActivations) {
  StageSpec s;
  s.layers = 2;
  s.ckptLayers = ckptLayers;
  s.offloadActivations = offloadActivations;
  s.buffers = {{"w", 4, BufferKind::Float, true, true, true},
               {"w.grad", 4, BufferKind::Float, true, false, false},
               {"x", 8, BufferKind::Float, true, true, true},
               {"h", 8, BufferKind::Float, true, true, true},
               {"h.grad", 8, BufferKind::Float, true, false, false},
               {"tokens", 2, BufferKind::Ids, false, true, true},
               {"t", 8, BufferKind::Float, true, true, false}};
  s.params = {{"w", 0, {1}, {4}, -1, {}, {RegionKind::Layer}, false}};
  s.layerIn = 2;
  return s;
}

} // namespace

TEST(ActivationStash, KeepsEachMicroBatchsActivationsApartWithoutCopies) {
  StageSpec stage = tinyStage(0, 0.5);
  StageMemory memory(stage, /*slots=*/2); // two micro-batches in flight
  OffloadEngine engine;
  Streams streams;
  ActivationStash stash(stage, memory, engine, streams);
  EXPECT_EQ(stash.slots(), 2);
  Frame &global = memory.global();
  std::vector<Frame> &layers = memory.layers();
  auto fill = [&](int buffer, float v) {
    for (Frame &f : layers)
      device::fill(f.at(buffer).f32(), f.vec(buffer).size(), v);
  };
  auto forward = [&](int mb, float v) {
    stash.begin(mb);
    // With activation offload a layer's saved arrays get memory when its
    // forward begins, not before.
    EXPECT_TRUE(layers[1].vec(3).empty());
    stash.prepareLayer(0);
    stash.prepareLayer(1);
    fill(2, v);
    fill(3, v);
    fill(4, v); // backward scratch: one array, shared by the layers
    global.idVec(5).upload(std::vector<int32_t>(2, int32_t(v)));
    stash.save(mb);
  };
  forward(0, 1);
  EXPECT_GT(engine.hostBytes(), 0u); // half of every float activation went to host
  forward(1, 2);
  EXPECT_EQ(layers[0].at(4).data, layers[1].at(4).data);
  EXPECT_NE(layers[0].at(3).data, layers[1].at(3).data);
  // The backward's slot; the layers' tails come back by the schedule's
  // swap-in steps.
  stash.restore(0);
  EXPECT_EQ(layers[1].vec(3).size(), 4u); // half still in host memory
  stash.restoreLayer(1);
  stash.restoreLayer(0);
  EXPECT_EQ(layers[1].vec(3).download(), std::vector<float>(8, 1.f));
  EXPECT_EQ(layers[0].vec(2).download(), std::vector<float>(8, 1.f));
  EXPECT_EQ(global.idVec(5).download(), std::vector<int32_t>(2, 1));
  EXPECT_EQ(layers[0].vec(4).download(), std::vector<float>(8, 2.f)); // not kept per micro-batch
  stash.restore(1);
  stash.restoreLayer(1);
  stash.restoreLayer(0);
  EXPECT_EQ(layers[0].vec(3).download(), std::vector<float>(8, 2.f));
  EXPECT_EQ(engine.hostBytes(), 0u);
  EXPECT_EQ(stash.inFlight(), 0u);
}

TEST(StageMemory, ACheckpointedLayerKeepsOnlyItsInput) {
  StageSpec all = tinyStage(0, 0), checkpointed = tinyStage(1, 0);
  StageMemory full(all, 2), partial(checkpointed, 2);
  // Per slot: x and h of two layers plus the tokens, against x, h, x and the tokens.
  EXPECT_EQ(full.slotBytes(), size_t(8 + 8 + 8 + 8 + 2) * 4);
  EXPECT_EQ(partial.slotBytes(), size_t(8 + 8 + 8 + 2) * 4);
  EXPECT_EQ(partial.recomputed(), (std::vector<int>{3}));
  EXPECT_EQ(partial.role(0), BufferRole::Parameter);
  EXPECT_EQ(partial.role(1), BufferRole::Parameter);
  EXPECT_EQ(partial.role(4), BufferRole::Scratch);
  EXPECT_EQ(partial.role(6), BufferRole::Scratch);
  EXPECT_EQ(partial.role(3), BufferRole::Saved);
}

TEST(StageMemoryDeathTest, AnImpossibleReservationSaysOutOfMemory) {
  StageSpec stage = tinyStage(0, 0);
  stage.buffers[3].elements = int64_t(1) << 61;
  EXPECT_DEATH(StageMemory(stage, 2), "out of memory");
}

TEST(ActivationStashDeathTest, MoreInFlightThanReservedEndsTheJob) {
  StageSpec stage = tinyStage(0, 0);
  StageMemory memory(stage, 1);
  OffloadEngine engine;
  Streams streams;
  ActivationStash stash(stage, memory, engine, streams);
  stash.begin(0);
  EXPECT_DEATH(stash.begin(1), "all 1 slots are taken");
}

TEST(ActivationStashDeathTest, ABackwardBeforeItsForwardEndsTheJob) {
  StageSpec stage = tinyStage(0, 0);
  StageMemory memory(stage, 2);
  OffloadEngine engine;
  Streams streams;
  ActivationStash stash(stage, memory, engine, streams);
  EXPECT_DEATH(stash.restore(3), "backward of micro-batch 3 before its forward");
}
