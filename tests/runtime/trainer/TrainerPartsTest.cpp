//===- TrainerPartsTest.cpp - Slot arena, offload engine, stash -----------===//
#include "runtime/trainer/ActivationStash.h"
#include "runtime/trainer/OffloadEngine.h"
#include "runtime/trainer/SlotArena.h"

#include <gtest/gtest.h>
#include <numeric>

using namespace mist::rt;

namespace {
DeviceArray<float> onDevice(const std::vector<float> &values) {
  DeviceArray<float> d;
  d.upload(values);
  return d;
}
std::vector<float> hostValues(const HostArray<float> &h) {
  return std::vector<float>(h.data(), h.data() + h.size());
}
} // namespace

TEST(SlotArena, HandsOutDistinctAlignedSlotsAndTakesThemBack) {
  SlotArena arena(100, 3, "test");
  EXPECT_EQ(arena.reservedBytes(), 3u * 128u); // slots rounded up to 64 bytes
  int a = arena.acquire(), b = arena.acquire(), c = arena.acquire();
  EXPECT_NE(a, b);
  EXPECT_NE(b, c);
  EXPECT_NE(a, c);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(arena.at(b)) % 64, 0u);
  arena.release(b);
  EXPECT_EQ(arena.acquire(), b);
}

TEST(SlotArenaDeathTest, MoreInFlightThanReservedEndsTheJob) {
  EXPECT_DEATH(
      {
        SlotArena arena(16, 1, "the activations");
        arena.acquire();
        arena.acquire();
      },
      "the activations: all 1 slots are taken");
}

TEST(SlotArenaDeathTest, AnImpossibleReservationSaysOutOfMemory) {
  EXPECT_DEATH(SlotArena(size_t(1) << 62, 8, "the activations"), "out of memory");
}

TEST(OffloadEngine, SwapsTheTailOutAndBackIntact) {
  OffloadEngine engine;
  std::vector<float> values(10);
  std::iota(values.begin(), values.end(), 0.f);
  DeviceArray<float> device = onDevice(values);
  HostArray<float> host;
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
  DeviceArray<float> device = onDevice(std::vector<float>(4, 1.f));
  HostArray<float> host;
  engine.swapOut(device, host, 0.0);
  EXPECT_EQ(device.size(), 4u);
  EXPECT_TRUE(host.empty());
  engine.swapOut(device, host, 1.0);
  EXPECT_TRUE(device.empty());
  EXPECT_EQ(host.size(), 4u);
  engine.swapIn(device, host);
  EXPECT_EQ(device.download(), std::vector<float>(4, 1.f));
}

TEST(OffloadEngine, CopiesOutAndInPlace) {
  OffloadEngine engine;
  DeviceArray<float> device = onDevice({1, 2, 3, 4});
  HostArray<float> host;
  engine.copyOut(device.data() + 2, 2, host);
  device::fill(device.data() + 2, 2, 0.f);
  engine.copyIn(device.data() + 2, host);
  EXPECT_EQ(device.download(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(engine.hostBytes(), 0u);
}

TEST(ActivationStash, MaxInFlightFollowsTheOneFOneBOrder) {
  // Stage 0 of 3 with G = 4: F0 F1 F2 B0 F3 B1 B2 B3 keeps three in flight.
  std::vector<ScheduleEntry> first{{0, true}, {1, true},  {2, true},  {0, false},
                                   {3, true}, {1, false}, {2, false}, {3, false}};
  EXPECT_EQ(ActivationStash::maxInFlight(first), 3);
  std::vector<ScheduleEntry> last{{0, true}, {0, false}, {1, true}, {1, false}};
  EXPECT_EQ(ActivationStash::maxInFlight(last), 1);
}

namespace {

/// A one-layer stage: buffer 0 the layer's weight, 1 its gradient, 2 the
/// layer input, 3 an activation the forward writes, 4 a buffer only the
/// backward uses, 5 the tokens.
StageSpec tinyStage(int ckptLayers, double offloadActivations) {
  StageSpec s;
  s.layers = 2;
  s.ckptLayers = ckptLayers;
  s.offloadActivations = offloadActivations;
  s.buffers = {
      {"w", 4, BufferKind::Float, true, true},       {"w.grad", 4, BufferKind::Float, true, false},
      {"x", 8, BufferKind::Float, true, true},       {"h", 8, BufferKind::Float, true, true},
      {"h.grad", 8, BufferKind::Float, true, false}, {"tokens", 2, BufferKind::Ids, false, true}};
  s.params = {{"w", 0, {1}, {4}, -1, {}, {RegionKind::Layer}, false}};
  s.layerIn = 2;
  s.order = {{0, true}, {1, true}, {0, false}, {1, false}};
  return s;
}

} // namespace

TEST(ActivationStash, KeepsEachMicroBatchsActivationsApart) {
  StageSpec stage = tinyStage(0, 0.5);
  OffloadEngine engine;
  Streams streams;
  ActivationStash stash(stage, engine, streams);
  EXPECT_EQ(stash.slots(), 2);
  Frame global(stage.buffers, false);
  std::vector<Frame> layers(2, Frame(stage.buffers, true));
  auto fill = [&](float v) {
    for (Frame &f : layers)
      for (int b : {2, 3, 4})
        device::fill(f.at(b), f.vec(b).size(), v);
    global.idVec(5).upload(std::vector<int32_t>(2, int32_t(v)));
  };
  fill(1);
  stash.save(0, global, layers);
  EXPECT_GT(engine.hostBytes(), 0u); // half of every float activation went to host
  fill(2);
  stash.save(1, global, layers);
  fill(9);
  stash.restore(0, global, layers);
  EXPECT_EQ(layers[1].vec(3).download(), std::vector<float>(8, 1.f));
  EXPECT_EQ(layers[0].vec(2).download(), std::vector<float>(8, 1.f));
  EXPECT_EQ(global.idVec(5).download(), std::vector<int32_t>(2, 1));
  EXPECT_EQ(layers[0].vec(4).download(), std::vector<float>(8, 9.f)); // backward-only: not stashed
  stash.restore(1, global, layers);
  EXPECT_EQ(layers[0].vec(3).download(), std::vector<float>(8, 2.f));
  EXPECT_EQ(engine.hostBytes(), 0u);
  EXPECT_EQ(stash.inFlight(), 0u);
}

TEST(ActivationStash, ACheckpointedLayerKeepsOnlyItsInput) {
  StageSpec all = tinyStage(0, 0), checkpointed = tinyStage(1, 0);
  OffloadEngine engine;
  Streams streams;
  ActivationStash full(all, engine, streams), partial(checkpointed, engine, streams);
  // Per micro-batch: x and h of two layers plus tokens, against x, h, x, tokens.
  auto slot = [](size_t bytes) { return (bytes + 63) / 64 * 64; };
  EXPECT_EQ(full.reservedBytes(), 2 * slot((8 + 8 + 8 + 8 + 2) * 4));
  EXPECT_EQ(partial.reservedBytes(), 2 * slot((8 + 8 + 8 + 2) * 4));
  EXPECT_EQ(ActivationStash::checkpointReleased(checkpointed), (std::vector<int>{3, 4}));
}

TEST(ActivationStashDeathTest, ABackwardBeforeItsForwardEndsTheJob) {
  StageSpec stage = tinyStage(0, 0);
  OffloadEngine engine;
  Streams streams;
  ActivationStash stash(stage, engine, streams);
  Frame global(stage.buffers, false);
  std::vector<Frame> layers(2, Frame(stage.buffers, true));
  EXPECT_DEATH(stash.restore(3, global, layers), "backward of micro-batch 3 before its forward");
}
