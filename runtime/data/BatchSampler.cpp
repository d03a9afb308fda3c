//===- BatchSampler.cpp - The same global batches under every plan --------===//
#include "runtime/data/BatchSampler.h"

#include "runtime/trainer/Hash.h" // header only: the counter hash

#include <algorithm>

namespace mist::rt {

namespace {

/// The shape's counts are at least 1 and a step's tokens fit in int64.
std::optional<std::string> checkShape(const std::string &source, const BatchShape &shape) {
  if (shape.dp < 1 || shape.microBatch < 1 || shape.gradAccum < 1 || shape.seqLen < 1)
    return source + ": batch shape needs dp, micro-batch, gradient accumulation and " +
           "sequence length of at least 1 (got dp " + std::to_string(shape.dp) + ", micro-batch " +
           std::to_string(shape.microBatch) + ", accumulation " + std::to_string(shape.gradAccum) +
           ", sequence " + std::to_string(shape.seqLen) + ")";
  // sequenceStart multiplies B * T; keep it (and k * T) inside int64.
  int64_t sequencesPerStep = 0, tokensPerStep = 0;
  if (__builtin_mul_overflow(int64_t(shape.dp) * shape.microBatch, int64_t(shape.gradAccum),
                             &sequencesPerStep) ||
      __builtin_mul_overflow(sequencesPerStep, int64_t(shape.seqLen), &tokensPerStep))
    return source + ": a global batch of " + std::to_string(shape.dp) + " * " +
           std::to_string(shape.microBatch) + " * " + std::to_string(shape.gradAccum) +
           " sequences of " + std::to_string(shape.seqLen) + " tokens is too large";
  return std::nullopt;
}

} // namespace

std::optional<BatchSampler> BatchSampler::create(const TokenFile &tokens, const BatchShape &shape,
                                                 std::string &error) {
  if (auto bad = checkShape(tokens.path(), shape)) {
    error = *bad;
    return std::nullopt;
  }
  if (tokens.size() < int64_t(shape.seqLen) + 1) {
    error = tokens.path() + ": " + std::to_string(tokens.size()) +
            " tokens are too few for sequences of " + std::to_string(shape.seqLen) +
            " (need at least " + std::to_string(int64_t(shape.seqLen) + 1) +
            ": the inputs and the next token)";
    return std::nullopt;
  }
  return BatchSampler(&tokens, nullptr, shape);
}

std::optional<BatchSampler> BatchSampler::create(const MegatronData &data, const BatchShape &shape,
                                                 int64_t steps, std::string &error) {
  if (auto bad = checkShape("Megatron-LM data", shape)) {
    error = *bad;
    return std::nullopt;
  }
  if (steps < 0 || steps > data.size() / shape.globalBatch()) {
    error = "Megatron-LM data: " + std::to_string(steps) + " steps of " +
            std::to_string(shape.globalBatch()) + " samples need more than the " +
            std::to_string(data.size()) + " samples built";
    return std::nullopt;
  }
  return BatchSampler(nullptr, &data, shape);
}

std::optional<std::string> BatchSampler::readSequence(int64_t step, int64_t k,
                                                      uint32_t *out) const {
  if (megatron)
    return megatron->read(step * batchShape.globalBatch() + k, out);
  return tokens->read(sequenceStart(step, k), int64_t(batchShape.seqLen) + 1, out);
}

int64_t BatchSampler::shuffledWindow(int64_t pass, int64_t index, int64_t windows) const {
  // A 4-round Feistel network permutes [0, 4^h) (h bits per half, 4^h >= W);
  // cycle walking (apply it again until the value is below W) restricts the
  // permutation to [0, W) and takes under 4 tries on average.
  int halfBits = 1;
  while ((int64_t(1) << (2 * halfBits)) < windows)
    ++halfBits;
  const uint64_t mask = (uint64_t(1) << halfBits) - 1;
  const uint64_t key = splitmix64(*shuffleSeed ^ splitmix64(uint64_t(pass)));
  uint64_t x = uint64_t(index);
  do {
    uint64_t left = x >> halfBits, right = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      const uint64_t next = left ^ (splitmix64(key + round * 0x632be59bd9b4e019ull + right) & mask);
      left = right;
      right = next;
    }
    x = left << halfBits | right;
  } while (x >= uint64_t(windows));
  return int64_t(x);
}

int64_t BatchSampler::sequenceStart(int64_t step, int64_t k) const {
  if (shuffleSeed) {
    const int64_t T = batchShape.seqLen, windows = (tokens->size() - 1) / T;
    const int64_t j = step * batchShape.globalBatch() + k;
    return shuffledWindow(j / windows, j % windows, windows) * T;
  }
  // (j * T) mod M with j = s * B + k, computed from residues: M = N - T is
  // below 2^31 (the header's count is an int32), so every product of two
  // residues fits in int64 whatever the step.
  const int64_t windows = tokens->size() - batchShape.seqLen;
  auto mod = [windows](int64_t x) { return ((x % windows) + windows) % windows; };
  const int64_t tokensPerStep = batchShape.globalBatch() * batchShape.seqLen;
  return mod(mod(step) * mod(tokensPerStep) + mod(k * batchShape.seqLen));
}

std::optional<std::string> BatchSampler::fillSamples(int64_t step, int microBatch,
                                                     int64_t firstSample, int64_t count,
                                                     uint32_t *inputs, uint32_t *targets) const {
  const int64_t samplesPerMicroBatch = int64_t(batchShape.dp) * batchShape.microBatch;
  if (step < 0)
    return source() + ": step " + std::to_string(step) + " is negative";
  if (microBatch < 0 || microBatch >= batchShape.gradAccum)
    return source() + ": micro-batch " + std::to_string(microBatch) + " is out of range for " +
           std::to_string(batchShape.gradAccum) + " per step";
  if (firstSample < 0 || count < 0 || firstSample + count > samplesPerMicroBatch)
    return source() + ": samples [" + std::to_string(firstSample) + ", " +
           std::to_string(firstSample + count) + ") are out of range for a micro-batch of " +
           std::to_string(samplesPerMicroBatch);
  const int64_t T = batchShape.seqLen;
  std::vector<uint32_t> window(size_t(T) + 1); // a sequence and its next token
  for (int64_t i = 0; i < count; ++i) {
    const int64_t k = microBatch * samplesPerMicroBatch + firstSample + i;
    if (auto error = readSequence(step, k, window.data()))
      return error;
    std::copy(window.begin(), window.end() - 1, inputs + i * T);
    std::copy(window.begin() + 1, window.end(), targets + i * T);
  }
  return std::nullopt;
}

std::optional<std::string> BatchSampler::fill(int64_t step, int microBatch, int dpRank,
                                              uint32_t *inputs, uint32_t *targets) const {
  if (dpRank < 0 || dpRank >= batchShape.dp)
    return source() + ": dp rank " + std::to_string(dpRank) + " is out of range for dp " +
           std::to_string(batchShape.dp);
  return fillSamples(step, microBatch, int64_t(dpRank) * batchShape.microBatch,
                     batchShape.microBatch, inputs, targets);
}

std::optional<MicroBatch> BatchSampler::sample(int64_t step, int microBatch, int dpRank,
                                               std::string &error) const {
  const size_t n = size_t(batchShape.microBatch) * size_t(batchShape.seqLen);
  MicroBatch batch{std::vector<uint32_t>(n), std::vector<uint32_t>(n)};
  if (auto failed = fill(step, microBatch, dpRank, batch.inputs.data(), batch.targets.data())) {
    error = *failed;
    return std::nullopt;
  }
  return batch;
}

} // namespace mist::rt
