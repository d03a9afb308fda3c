//===- BatchSampler.h - The same global batches under every plan ----------===//
/// \file
/// Deterministic batches for data-parallel training with gradient
/// accumulation. The global batch of a step is B = R * b * G sequences of T
/// tokens (R dp ranks, b sequences per rank and micro-batch, G micro-batches),
/// and which sequences it holds depends only on B and T, never on how a plan
/// splits it, so plans with the same global batch train on identical data.
///
/// The rule (steps count from 0; N is the number of tokens in the file):
///
///   sequence k (0 <= k < B) of step s is global sequence j = s * B + k;
///   it starts at token offset  start(j) = (j * T) mod (N - T),
///   its inputs are tokens [start, start + T) and its targets tokens
///   [start + 1, start + T + 1) (the next token of each input);
///   it goes to micro-batch m = k / (R * b), dp rank r = (k mod (R * b)) / b,
///   row i = k mod b of that rank's [b, T] micro-batch.
///
/// So consecutive sequences tile the file (each input window starts where
/// the previous one ended), and after N - T tokens the offsets wrap around
/// with a shift, a new pass over the data. N - T is the number of windows
/// of T + 1 tokens, so every start is valid. Micro-batch m is sequences
/// [m * R * b, (m + 1) * R * b) of the step, and dp rank r holds its samples
/// [r * b, (r + 1) * b), the split runtime/comm/RankLayout.h uses to re-slice
/// micro-batches between stages of different dp.
///
/// Shuffled (BatchSampler::shuffle, the trainer's --shuffle): the file is cut
/// into W = floor((N - 1) / T) windows of T + 1 tokens starting at multiples
/// of T, and global sequence j is window perm_p(j mod W) of pass p = j / W,
/// where perm_p is a pseudo-random permutation of [0, W) keyed by the seed
/// and p (a Feistel network over the next power of four, walked until it
/// lands below W). Every pass reads each window once, in a new order.
///
/// Over Megatron-LM data (MegatronData, the trainer's --data-path), global
/// sequence j is Megatron-LM's training sample j, which is the order of
/// Megatron-LM's own sampler (consecutive samples fill a global batch, its
/// micro-batches and then its dp ranks, as above).
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/data/MegatronData.h"
#include "runtime/data/TokenFile.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mist::rt {

struct BatchShape {
  int dp = 1;         ///< R: data-parallel ranks
  int microBatch = 1; ///< b: sequences per rank and micro-batch
  int gradAccum = 1;  ///< G: micro-batches per step
  int seqLen = 1;     ///< T: tokens per sequence
  int64_t globalBatch() const { return int64_t(dp) * microBatch * gradAccum; }
};

/// One rank's micro-batch: row-major [b, T].
struct MicroBatch {
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> targets;
};

class BatchSampler {
public:
  /// A sampler over `tokens`, which must outlive it. nullopt, with `error`
  /// naming the file, when a count in `shape` is below 1 or the file holds
  /// fewer than T + 1 tokens (one input window and its targets).
  static std::optional<BatchSampler> create(const TokenFile &tokens, const BatchShape &shape,
                                            std::string &error);
  /// A sampler over Megatron-LM data, which must outlive it and hold at
  /// least `steps` global batches.
  static std::optional<BatchSampler> create(const MegatronData &data, const BatchShape &shape,
                                            int64_t steps, std::string &error);

  const BatchShape &shape() const { return batchShape; }

  /// Reads the windows in a shuffled order instead (see "Shuffled" above):
  /// a pure function of `seed` and the sequence index, so still the same
  /// data under every plan, and the same again when a run resumes.
  void shuffle(uint64_t seed) { shuffleSeed = seed; }

  /// The token offset where sequence k of step s starts (the rule above).
  int64_t sequenceStart(int64_t step, int64_t k) const;

  /// The index k in its step's global batch of row `row` of dp rank `dpRank`
  /// in micro-batch `microBatch`.
  int64_t sequenceIndex(int microBatch, int dpRank, int row) const {
    return (int64_t(microBatch) * batchShape.dp + dpRank) * batchShape.microBatch + row;
  }

  /// Dp rank `dpRank`'s part of micro-batch `microBatch` of step `step`:
  /// b * T inputs and b * T targets, row-major [b, T].
  std::optional<MicroBatch> sample(int64_t step, int microBatch, int dpRank,
                                   std::string &error) const;

  /// The same into caller buffers of b * T tokens each. Returns the error
  /// (an index out of range), or nullopt.
  std::optional<std::string> fill(int64_t step, int microBatch, int dpRank, uint32_t *inputs,
                                  uint32_t *targets) const;

  /// Samples [firstSample, firstSample + count) of micro-batch `microBatch`
  /// (R * b samples, whatever the stage's dp) into buffers of count * T
  /// tokens each: what a stage whose dp differs from R's split needs.
  std::optional<std::string> fillSamples(int64_t step, int microBatch, int64_t firstSample,
                                         int64_t count, uint32_t *inputs, uint32_t *targets) const;

private:
  BatchSampler(const TokenFile *tokens, const MegatronData *megatron, const BatchShape &shape)
      : tokens(tokens), megatron(megatron), batchShape(shape) {}

  /// The data's name for messages.
  std::string source() const { return tokens ? tokens->path() : "Megatron-LM data"; }
  /// Sequence k of step `step`: T + 1 tokens.
  std::optional<std::string> readSequence(int64_t step, int64_t k, uint32_t *out) const;

  /// Window `index` of pass `pass` over the W windows, shuffled.
  int64_t shuffledWindow(int64_t pass, int64_t index, int64_t windows) const;

  const TokenFile *tokens = nullptr; ///< one of the two
  const MegatronData *megatron = nullptr;
  BatchShape batchShape;
  std::optional<uint64_t> shuffleSeed;
};

} // namespace mist::rt
