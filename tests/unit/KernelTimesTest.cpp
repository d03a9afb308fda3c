//===- KernelTimesTest.cpp - GEMM waves, attention, collectives, host links ===//
/// Each component model against values computed by hand from its formula
/// (docs/perf-model.md, "Kernels" and "Collectives").
#include "perfmodel/KernelTimes.h"
#include "perfmodel/Collectives.h"
#include <gtest/gtest.h>

using namespace mist;

namespace {

DeviceProfile h100Like() {
  DeviceProfile d;
  d.sms = 132;
  d.gemmTile = {256, 128};
  d.attentionFwdEfficiency = 0.614;
  d.attentionFwdHalfKeys = 261;
  d.attentionBwdEfficiency = 0.522;
  d.attentionBwdHalfKeys = 696;
  return d;
}

/// Eight GPUs per node on NVLink (300 GB/s at 0.8), eight 25 GB/s NICs at 0.9.
Cluster dgxLike(int nodes) {
  Cluster c;
  c.nodes = nodes;
  c.gpusPerNode = 8;
  c.network = {300, 0.8, 8, 25, 0.9};
  return c;
}

} // namespace

TEST(KernelTimes, WavesRoundUpToWholeWaves) {
  EXPECT_DOUBLE_EQ(waveEfficiency(1024, 132), 1024.0 / 1056);
  EXPECT_DOUBLE_EQ(waveEfficiency(132, 132), 1);
  EXPECT_DOUBLE_EQ(waveEfficiency(133, 132), 133.0 / 264);
}

TEST(KernelTimes, GemmRunsInWavesOfTiles) {
  const DeviceProfile d = h100Like();
  const double rate = 1e15;
  // 8192^3: 32 x 64 = 2048 tiles of 256 x 128, 16 waves of 132 SMs.
  double t = gemmComputeSeconds(d, rate, 8192, 8192, 8192);
  EXPECT_DOUBLE_EQ(t, 16 * 2.0 * 256 * 128 * 8192 / (rate / 132));
  EXPECT_NEAR(t, 2.0 * 8192 * 8192 * 8192 / rate * 2112 / 2048, 1e-15);
  // One tile more than a wave costs a second wave (transposing the tile
  // would need 266 tiles, three waves).
  double full = gemmComputeSeconds(d, rate, 132 * 256, 128, 4096);
  EXPECT_DOUBLE_EQ(gemmComputeSeconds(d, rate, 132 * 256 + 1, 128, 4096), 2 * full);
  // A dimension that is not a multiple of the tile pays for the whole edge tile.
  EXPECT_DOUBLE_EQ(gemmComputeSeconds(d, rate, 100, 100, 4096),
                   2.0 * 256 * 128 * 4096 / (rate / 132));
  // Without SMs: the flat roofline.
  DeviceProfile flat;
  EXPECT_DOUBLE_EQ(gemmComputeSeconds(flat, rate, 100, 100, 4096), 2.0 * 100 * 100 * 4096 / rate);
}

TEST(KernelTimes, FlashAttentionGrowsWithTheKeyRange) {
  const DeviceProfile d = h100Like();
  // B4 H16 s2048, causal: 1024 query blocks, keys = 1024 on average.
  double fwd = attentionEfficiency(d, 4, 16, 2048, /*causal=*/true, /*backward=*/false);
  EXPECT_DOUBLE_EQ(fwd, 0.614 * 1024 / (1024 + 261) * 1024 / 1056);
  // The preset's figures give back the H100 measurement they come from
  // (469 TFLOP/s of 989) to the rounding of the preset.
  EXPECT_NEAR(fwd * 989, 469, 1);
  double bwd = attentionEfficiency(d, 1, 32, 4096, true, true);
  EXPECT_DOUBLE_EQ(bwd, 0.522 * 2048 / (2048 + 696) * 1024 / 1056);
  // Without causal masking each block sweeps every key: more efficient.
  EXPECT_GT(attentionEfficiency(d, 4, 16, 2048, false, false), fwd);
  EXPECT_EQ(attentionEfficiency(DeviceProfile{}, 4, 16, 2048, true, false), 0);
}

TEST(KernelTimes, ScoreMatrixTraffic) {
  // 1 x 1 x 2 x 2 = 4 scores of 2 bytes: forward 6 passes and a mask byte,
  // backward 8 passes and the mask read.
  EXPECT_DOUBLE_EQ(scoreMatrixBytes(1, 1, 2, 2, /*dropout=*/true, /*backward=*/false), 4 * 13);
  EXPECT_DOUBLE_EQ(scoreMatrixBytes(1, 1, 2, 2, true, true), 4 * 17);
  EXPECT_DOUBLE_EQ(scoreMatrixBytes(1, 1, 2, 2, false, false), 4 * 8);
  EXPECT_DOUBLE_EQ(scoreMatrixBytes(1, 1, 2, 2, false, true), 4 * 12);
}

TEST(Collectives, BusBandwidthIsTheSlowestLinksOverTheHierarchy) {
  Cluster c = dgxLike(4);
  EXPECT_DOUBLE_EQ(modelBusGBs(c, 1, 8), 240);          // NVLink
  EXPECT_DOUBLE_EQ(modelBusGBs(c, 2, 8), 8 * 25 * 0.9); // eight NICs per node
  EXPECT_DOUBLE_EQ(modelBusGBs(c, 2, 4), 4 * 25 * 0.9); // the group's four
  EXPECT_DOUBLE_EQ(modelBusGBs(c, 4, 1), 25 * 0.9);     // one
  c.network.nicsPerNode = 4;                            // two GPUs share a NIC
  EXPECT_DOUBLE_EQ(modelBusGBs(c, 4, 1), 0.5 * 25 * 0.9);
}

TEST(Collectives, LargeAllReduceInsideANodeIsARingAtFullBandwidth) {
  Cluster c = dgxLike(1);
  // Ring, Simple: 8.4 us + 14 NVLink steps of 3.4 us; 2 * 7/8 of the buffer at 240 GB/s.
  EXPECT_NEAR(collectiveSeconds(c, Collective::AllReduce, 1e9, 1, 8),
              (8.4 + 14 * 3.4) * 1e-6 + 2 * 7.0 / 8 * 1e9 / 240e9, 1e-12);
  // All-gather: one pass, 7 steps.
  EXPECT_NEAR(collectiveSeconds(c, Collective::AllGather, 1e9, 1, 8),
              (8.4 + 7 * 3.4) * 1e-6 + 7.0 / 8 * 1e9 / 240e9, 1e-12);
}

TEST(Collectives, SmallMessagesTakeTheLowLatencyProtocol) {
  Cluster c = dgxLike(1);
  // Ring, LL: 3.6 us + 14 steps of 0.47 us, at a quarter of the bandwidth.
  EXPECT_NEAR(collectiveSeconds(c, Collective::AllReduce, 1000, 1, 8),
              (3.6 + 14 * 0.47) * 1e-6 + 2 * 7.0 / 8 * 1000 / 60e9, 1e-12);
}

TEST(Collectives, AllReduceAcrossManyNodesTakesATree) {
  Cluster c = dgxLike(64);
  // 512 ranks: a ring has 1022 steps (126 across nodes), ~4.3 ms of latency;
  // the low-latency tree goes up and down 7 NVLink hops and log2(64) = 6
  // network hops at 180 * 0.9 / 3.8 GB/s.
  double tree =
      (4.4 + 2 * (7 * 0.52 + 6 * 5.0)) * 1e-6 + 2 * 511.0 / 512 * 1e6 / (180 * 0.9 / 3.8 * 1e9);
  EXPECT_NEAR(collectiveSeconds(c, Collective::AllReduce, 1e6, 64, 8), tree, 1e-12);
  // Trees run all-reduce only: an all-gather stays a ring (LL at this size).
  double ringLL = (3.6 + (511 - 63) * 0.47 + 63 * 2.7) * 1e-6 + 511.0 / 512 * 1e6 / (45e9);
  EXPECT_NEAR(collectiveSeconds(c, Collective::AllGather, 1e6, 64, 8), ringLL, 1e-12);
}

TEST(Collectives, AMeasuredEntryWinsOverTheModel) {
  Cluster c = dgxLike(2);
  c.collectives.push_back({1, 8, 100, 5});
  EXPECT_NEAR(collectiveSeconds(c, Collective::AllReduce, 1e9, 1, 8),
              2 * 7.0 / 8 * 1e9 / 100e9 + 5e-6, 1e-12);
  EXPECT_DOUBLE_EQ(groupBusGBs(c, 1, 8), 100);
  EXPECT_DOUBLE_EQ(groupBusGBs(c, 2, 8), 180); // no entry: the model
}

TEST(HostLinks, GpusBehindOneLinkShareIt) {
  Cluster c = dgxLike(1);
  c.h2dGBs = 50;
  c.d2hGBs = 40;
  EXPECT_DOUBLE_EQ(c.sharedH2dGBs(), 50);
  c.gpusPerHostLink = 2;
  EXPECT_DOUBLE_EQ(c.sharedH2dGBs(), 25);
  EXPECT_DOUBLE_EQ(c.sharedD2hGBs(), 20);
  c.gpusPerNode = 1; // alone on its link
  EXPECT_DOUBLE_EQ(c.sharedH2dGBs(), 50);
}
