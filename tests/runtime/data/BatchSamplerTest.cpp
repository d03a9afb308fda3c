//===- BatchSamplerTest.cpp - Same global batches whatever the split ------===//
/// The data is a file whose token i is i, so a sequence's tokens say where it
/// starts. Plans that split the same global batch differently over dp ranks
/// (R), per-rank micro-batch (b) and accumulation (G) must see the same
/// sequences in every step.
//===----------------------------------------------------------------------===//
#include "runtime/data/BatchSampler.h"
#include "tests/runtime/data/TempDirectory.h"

#include <algorithm>
#include <gtest/gtest.h>
#include <numeric>

using namespace mist::rt;
using mist::rt::testing::TempDirectory;

namespace {

/// A token file of `count` tokens whose token i is i.
TokenFile countingFile(const TempDirectory &tmp, int64_t count) {
  std::vector<uint32_t> tokens(static_cast<size_t>(count));
  std::iota(tokens.begin(), tokens.end(), 0u);
  const std::string path = tmp.path("counting.bin");
  EXPECT_EQ(writeTokenFile(path, tokens, TokenFormat::Llama3), std::nullopt);
  std::string error;
  std::optional<TokenFile> file = TokenFile::open(path, error);
  if (!file)
    throw std::runtime_error(error);
  return std::move(*file);
}

BatchSampler makeSampler(const TokenFile &file, BatchShape shape) {
  std::string error;
  std::optional<BatchSampler> sampler = BatchSampler::create(file, shape, error);
  if (!sampler)
    throw std::runtime_error(error);
  return *sampler;
}

using Sequence = std::pair<std::vector<uint32_t>, std::vector<uint32_t>>; // inputs, targets

/// Every sequence of step `step`, indexed by its place k in the global
/// batch, assembled from every (micro-batch, dp rank) part.
std::vector<Sequence> globalBatch(const BatchSampler &sampler, int64_t step) {
  const BatchShape &s = sampler.shape();
  std::vector<Sequence> batch(size_t(s.globalBatch()));
  for (int m = 0; m < s.gradAccum; ++m)
    for (int r = 0; r < s.dp; ++r) {
      std::string error;
      std::optional<MicroBatch> part = sampler.sample(step, m, r, error);
      EXPECT_TRUE(part) << error;
      if (!part)
        return {};
      EXPECT_EQ(part->inputs.size(), size_t(s.microBatch) * s.seqLen);
      for (int i = 0; i < s.microBatch; ++i) {
        const int64_t k = sampler.sequenceIndex(m, r, i);
        EXPECT_EQ(m, k / (int64_t(s.dp) * s.microBatch));
        EXPECT_EQ(r, (k % (int64_t(s.dp) * s.microBatch)) / s.microBatch);
        auto row = [&](const std::vector<uint32_t> &v) {
          return std::vector<uint32_t>(v.begin() + i * s.seqLen, v.begin() + (i + 1) * s.seqLen);
        };
        EXPECT_TRUE(batch[size_t(k)].first.empty()) << "sequence " << k << " sampled twice";
        batch[size_t(k)] = {row(part->inputs), row(part->targets)};
      }
    }
  return batch;
}

} // namespace

TEST(BatchSampler, FollowsTheDocumentedRule) {
  TempDirectory tmp;
  const int64_t N = 1000;
  TokenFile file = countingFile(tmp, N);
  const BatchShape shape{/*dp=*/2, /*microBatch=*/3, /*gradAccum=*/2, /*seqLen=*/16};
  BatchSampler sampler = makeSampler(file, shape);
  const int64_t B = shape.globalBatch(), T = shape.seqLen;
  for (int64_t step = 0; step < 30; ++step) { // 30 * 12 * 16 tokens: several passes
    std::vector<Sequence> batch = globalBatch(sampler, step);
    ASSERT_EQ(batch.size(), size_t(B));
    for (int64_t k = 0; k < B; ++k) {
      const int64_t start = ((step * B + k) * T) % (N - T);
      EXPECT_EQ(sampler.sequenceStart(step, k), start);
      for (int64_t t = 0; t < T; ++t) {
        EXPECT_EQ(batch[k].first[t], uint32_t(start + t)) << "step " << step << " k " << k;
        EXPECT_EQ(batch[k].second[t], uint32_t(start + t + 1)) << "targets are the next token";
      }
    }
  }
}

TEST(BatchSampler, GlobalBatchIsTheSameForEverySplit) {
  TempDirectory tmp;
  TokenFile file = countingFile(tmp, 997); // prime: wrap-arounds land on odd offsets
  const int T = 7;
  // Every (R, b, G) with R * b * G = 24.
  std::vector<BatchShape> shapes;
  for (int R = 1; R <= 24; ++R)
    for (int b = 1; R * b <= 24; ++b)
      if (24 % (R * b) == 0)
        shapes.push_back({R, b, 24 / (R * b), T});
  ASSERT_GT(shapes.size(), 20u);

  const BatchSampler reference = makeSampler(file, {1, 24, 1, T});
  for (int64_t step : {0, 1, 2, 5, 17, 100, 12345}) {
    const std::vector<Sequence> expected = globalBatch(reference, step);
    std::vector<Sequence> expectedSet = expected;
    std::sort(expectedSet.begin(), expectedSet.end());
    for (const BatchShape &shape : shapes) {
      SCOPED_TRACE("R " + std::to_string(shape.dp) + ", b " + std::to_string(shape.microBatch) +
                   ", G " + std::to_string(shape.gradAccum) + ", step " + std::to_string(step));
      std::vector<Sequence> batch = globalBatch(makeSampler(file, shape), step);
      // The same sequences at the same places k, hence the same union over
      // ranks and micro-batches.
      EXPECT_EQ(batch, expected);
      std::sort(batch.begin(), batch.end());
      EXPECT_EQ(batch, expectedSet);
    }
  }
}

// Shuffled: every pass over the W windows reads each once (inputs start at
// multiples of T, targets follow), each pass in a new order, the order set
// by the seed alone, and every split of the global batch reads the same.
TEST(BatchSampler, ShuffledPassesArePermutationsOfTheWindows) {
  TempDirectory tmp;
  TokenFile file = countingFile(tmp, 997);
  const int T = 7;
  const int64_t windows = (997 - 1) / T; // 142
  auto shuffled = [&](BatchShape shape, uint64_t seed) {
    BatchSampler s = makeSampler(file, shape);
    s.shuffle(seed);
    return s;
  };
  const BatchSampler sampler = shuffled({1, 2, 1, T}, 42); // B = 2: 71 steps a pass
  std::vector<std::vector<int64_t>> passes(3);
  for (int64_t step = 0; step < 3 * windows / 2; ++step)
    for (int64_t k = 0; k < 2; ++k) {
      const int64_t start = sampler.sequenceStart(step, k);
      ASSERT_EQ(start % T, 0);
      passes[size_t((step * 2 + k) / windows)].push_back(start / T);
    }
  for (const std::vector<int64_t> &pass : passes) {
    std::vector<int64_t> sorted = pass;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> all(static_cast<size_t>(windows), 0);
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(sorted, all);
  }
  EXPECT_NE(passes[0], passes[1]);
  std::vector<int64_t> inOrder(static_cast<size_t>(windows), 0);
  std::iota(inOrder.begin(), inOrder.end(), 0);
  EXPECT_NE(passes[0], inOrder);
  // The tokens: inputs [start, start + T), targets one further.
  std::vector<Sequence> batch = globalBatch(sampler, 3);
  ASSERT_EQ(batch.size(), 2u);
  const uint32_t start = uint32_t(sampler.sequenceStart(3, 1));
  for (int i = 0; i < T; ++i) {
    EXPECT_EQ(batch[1].first[size_t(i)], start + uint32_t(i));
    EXPECT_EQ(batch[1].second[size_t(i)], start + uint32_t(i) + 1);
  }
  // Another seed, another order; the same seed under another split, the
  // same global batch.
  EXPECT_NE(shuffled({1, 2, 1, T}, 43).sequenceStart(0, 0) * windows +
                shuffled({1, 2, 1, T}, 43).sequenceStart(0, 1),
            sampler.sequenceStart(0, 0) * windows + sampler.sequenceStart(0, 1));
  const BatchSampler reference = shuffled({1, 24, 1, T}, 42);
  for (BatchShape shape : {BatchShape{2, 3, 4, T}, BatchShape{4, 1, 6, T}, BatchShape{24, 1, 1, T}})
    for (int64_t step : {0, 5, 99})
      EXPECT_EQ(globalBatch(shuffled(shape, 42), step), globalBatch(reference, step));
}

TEST(BatchSampler, StagesOfOtherDpReadTheSameSamples) {
  // A micro-batch of R * b = 8 samples: a stage of dp 4 (b = 2) and one of
  // dp 2 (b = 4) read their parts with fillSamples; each equals the
  // matching slice of the dp-8 split.
  TempDirectory tmp;
  TokenFile file = countingFile(tmp, 500);
  const int T = 5;
  BatchSampler sampler = makeSampler(file, {8, 1, 3, T});
  for (int m = 0; m < 3; ++m) {
    std::vector<uint32_t> all(8 * T), allTargets(8 * T);
    for (int r = 0; r < 8; ++r)
      ASSERT_EQ(sampler.fill(4, m, r, all.data() + r * T, allTargets.data() + r * T), std::nullopt);
    std::vector<uint32_t> part(4 * T), partTargets(4 * T);
    ASSERT_EQ(sampler.fillSamples(4, m, 4, 4, part.data(), partTargets.data()), std::nullopt);
    EXPECT_TRUE(std::equal(part.begin(), part.end(), all.begin() + 4 * T));
    EXPECT_TRUE(std::equal(partTargets.begin(), partTargets.end(), allTargets.begin() + 4 * T));
  }
}

TEST(BatchSampler, SmallestFileAndWrapAround) {
  TempDirectory tmp;
  TokenFile file = countingFile(tmp, 9);
  BatchSampler sampler = makeSampler(file, {1, 2, 1, 8}); // one window: tokens 0..8
  for (int64_t step = 0; step < 5; ++step) {
    std::string error;
    std::optional<MicroBatch> batch = sampler.sample(step, 0, 0, error);
    ASSERT_TRUE(batch) << error;
    for (int i = 0; i < 16; ++i) {
      EXPECT_EQ(batch->inputs[i], uint32_t(i % 8));
      EXPECT_EQ(batch->targets[i], uint32_t(i % 8 + 1));
    }
  }
}

TEST(BatchSampler, HugeStepsDoNotOverflow) {
  TempDirectory tmp;
  const int64_t N = 100003;
  TokenFile file = countingFile(tmp, N);
  BatchSampler sampler = makeSampler(file, {64, 16, 32, 4096});
  const int64_t B = 64 * 16 * 32, T = 4096;
  for (int64_t step : {int64_t(1) << 40, int64_t(999999999999), int64_t(1) << 50}) {
    const int64_t k = B - 1;
    const __int128 j = __int128(step) * B + k;
    const int64_t expected = int64_t((j * T) % (N - T));
    EXPECT_EQ(sampler.sequenceStart(step, k), expected) << "step " << step;
  }
}

TEST(BatchSampler, Errors) {
  TempDirectory tmp;
  TokenFile file = countingFile(tmp, 10);
  const std::string path = file.path();
  std::string error;
  EXPECT_FALSE(BatchSampler::create(file, {1, 1, 1, 10}, error));
  EXPECT_EQ(error, path + ": 10 tokens are too few for sequences of 10 (need at least 11: the "
                          "inputs and the next token)");
  EXPECT_FALSE(BatchSampler::create(file, {0, 1, 1, 4}, error));
  EXPECT_EQ(error, path + ": batch shape needs dp, micro-batch, gradient accumulation and "
                          "sequence length of at least 1 (got dp 0, micro-batch 1, "
                          "accumulation 1, sequence 4)");
  EXPECT_FALSE(BatchSampler::create(file, {1 << 30, 1 << 30, 1 << 30, 2}, error));
  EXPECT_NE(error.find("is too large"), std::string::npos) << error;

  BatchSampler sampler = makeSampler(file, {2, 1, 3, 4});
  EXPECT_FALSE(sampler.sample(0, 3, 0, error));
  EXPECT_EQ(error, path + ": micro-batch 3 is out of range for 3 per step");
  EXPECT_FALSE(sampler.sample(0, 0, 2, error));
  EXPECT_EQ(error, path + ": dp rank 2 is out of range for dp 2");
  EXPECT_FALSE(sampler.sample(-1, 0, 0, error));
  EXPECT_EQ(error, path + ": step -1 is negative");
  std::vector<uint32_t> in(8), out(8);
  EXPECT_EQ(sampler.fillSamples(0, 0, 1, 2, in.data(), out.data()),
            path + ": samples [1, 3) are out of range for a micro-batch of 2");
}
