//===- InitialValuesTest.cpp - A parameter's initial values and tp shards -===//
/// The index map of tp shards (hand-computed), that the shards of any split
/// cover the full tensor once, the draw through ops::drawInitialValues (the
/// CPU ops, on several threads) against initialValue at fullIndexOf, and
/// the distribution (0.02 N(0, 1)) and constants.
//===----------------------------------------------------------------------===//
#include "runtime/ops/Ops.h"
#include "runtime/trainer/Trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using namespace mist::rt;

namespace {

ParamSpec param(const char *name, std::vector<int64_t> shape, int shardAxis = -1,
                std::vector<int64_t> groups = {}) {
  ParamSpec p{};
  p.name = name;
  p.shape = std::move(shape);
  p.shardAxis = shardAxis;
  p.groups = std::move(groups);
  return p;
}

/// A fused q/k/v weight: 3 parts of 2 rows along axis 0, rows of 2.
ParamSpec fusedQkv() { return param("layer.attn.qkv.weight", {6, 2}, 0, {2, 2, 2}); }

} // namespace

TEST(InitialValues, ShardsOfAFusedTensorMapToTheirPartsRows) {
  const ParamSpec p = fusedQkv();
  // tp 2: each rank holds one row of each part: rank 0 rows 0, 2, 4 and
  // rank 1 rows 1, 3, 5 of the full [6, 2] tensor.
  const std::vector<int64_t> rank0{0, 1, 4, 5, 8, 9}, rank1{2, 3, 6, 7, 10, 11};
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(fullIndexOf(p, 0, 2, i), rank0[size_t(i)]) << i;
    EXPECT_EQ(fullIndexOf(p, 1, 2, i), rank1[size_t(i)]) << i;
  }
  // tp 1, or no split axis: the identity.
  for (int64_t i = 0; i < 12; ++i)
    EXPECT_EQ(fullIndexOf(p, 0, 1, i), i);
}

TEST(InitialValues, AnySplitCoversTheFullTensorOnce) {
  ParamSpec p = param("layer.mlp.fc1.weight", {24, 5}, 0);
  for (const std::vector<int64_t> &groups :
       {std::vector<int64_t>{}, std::vector<int64_t>{24}, std::vector<int64_t>{8, 8, 8}}) {
    p.groups = groups;
    for (int tp : {1, 2, 4}) {
      std::vector<int> seen(120, 0);
      for (int r = 0; r < tp; ++r)
        for (int64_t i = 0; i < 120 / tp; ++i)
          ++seen[size_t(fullIndexOf(p, r, tp, i))];
      for (int count : seen)
        ASSERT_EQ(count, 1) << "tp " << tp << ", " << groups.size() << " groups";
    }
  }
}

TEST(InitialValues, DrawnOnThreadsAsOneByOne) {
  const ParamSpec p = param("layer.mlp.fc1.weight", {4096, 1536}, 1, {768, 768});
  const int tp = 2, rank = 1, layer = 3;
  const uint64_t seed = 1234;
  // One rank's shard: 3 M values, three threads' worth (a thread takes 2^20 at least).
  const size_t n = 4096 * 768;
  std::vector<float> drawn(n), threaded(n);
  ops::drawInitialValues(initialValuesArgs(p, rank, tp, layer, seed, drawn.data(), n), 1);
  ops::drawInitialValues(initialValuesArgs(p, rank, tp, layer, seed, threaded.data(), n), 3);
  EXPECT_EQ(drawn, threaded);
  for (size_t i = 0; i < n; i += 997)
    ASSERT_EQ(drawn[i], initialValue(p.name, layer, fullIndexOf(p, rank, tp, int64_t(i)), seed))
        << i;
  // Another layer or seed: another stream.
  std::vector<float> other(n);
  ops::drawInitialValues(initialValuesArgs(p, rank, tp, layer + 1, seed, other.data(), n), 1);
  EXPECT_NE(drawn, other);
}

TEST(InitialValues, NormalWithStandardDeviationTwoHundredthsAndConstants) {
  const ParamSpec w = param("layer.attn.proj.weight", {1 << 20});
  const size_t n = size_t(1) << 20;
  std::vector<float> v(n);
  ops::drawInitialValues(initialValuesArgs(w, 0, 1, 0, 7, v.data(), n), 2);
  double sum = 0, squares = 0, beyond3 = 0;
  for (float x : v) {
    sum += x;
    squares += double(x) * x;
    beyond3 += std::fabs(x) > 0.06 ? 1 : 0;
  }
  const double mean = sum / double(n), sd = std::sqrt(squares / double(n) - mean * mean);
  // 2^20 draws: the mean's standard error is 2e-5, the sd's 1.4e-5.
  EXPECT_NEAR(mean, 0.0, 1e-4);
  EXPECT_NEAR(sd, 0.02, 1e-4);
  EXPECT_NEAR(beyond3 / double(n), 0.0027, 0.0005); // P(|z| > 3)

  const ParamSpec bias = param("layer.attn.proj.bias", {8}), norm = param("layer.ln1.weight", {8});
  std::vector<float> b(8, 5.f), g(8, 5.f);
  ops::drawInitialValues(initialValuesArgs(bias, 0, 1, 0, 7, b.data(), 8), 1);
  ops::drawInitialValues(initialValuesArgs(norm, 0, 1, 0, 7, g.data(), 8), 1);
  EXPECT_EQ(b, std::vector<float>(8, 0.f));
  EXPECT_EQ(g, std::vector<float>(8, 1.f));
}
