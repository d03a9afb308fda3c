//===- GptSampleIndex.h - Megatron-LM's GPT sample order over one dataset -===//
/// \file
/// Which tokens sample i of a Megatron-LM GPTDataset holds, computed as
/// Megatron-LM computes it (megatron/core/datasets/gpt_dataset.py and the
/// sample index of its helpers.cpp), so a run reads the same sequences in
/// the same order as Megatron-LM would from the same files and seed:
///
///  - the split's sequences [first, end) are concatenated, as many epochs as
///    the requested number of samples needs (each sample is T tokens plus
///    the next one), each epoch in a RandomState(seed)-shuffled order; when
///    the last epoch would be used for less than 80% of its samples it is
///    shuffled on its own after the others ("separate final epoch");
///  - the document index (those shuffled epochs) is cut into windows of T + 1
///    tokens that overlap by one token: the sample index holds where each
///    starts (position in the document index, offset in its sequence);
///  - the shuffle index is a RandomState permutation of the samples (of the
///    samples before the separate final epoch, then of the rest).
///
/// Sample i of the dataset is window shuffle[i]. The indices cost 4 bytes a
/// sequence per epoch and 24 bytes a sample, built once when a run starts.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/data/IndexedDataset.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mist::rt {

struct GptSampleRequest {
  int64_t firstSequence = 0, endSequence = 0; ///< the split's sequences
  /// Samples asked for (what decides the epochs); nullopt: one epoch, all
  /// of its samples (Megatron-LM's blends without weights).
  std::optional<int64_t> samples;
  int seqLen = 1;    ///< T
  uint32_t seed = 0; ///< Megatron-LM's --seed
};

class GptSampleIndex {
public:
  /// The indices over `dataset` (which must outlive this) for `request`.
  /// nullopt, with `error`, for an empty split or a sequence length below 2.
  static std::optional<GptSampleIndex> build(const IndexedDataset &dataset,
                                             const GptSampleRequest &request, std::string &error);

  /// The samples the index holds (at least what was asked for).
  int64_t size() const { return int64_t(shuffle.size()); }
  int epochs() const { return epochCount; }

  /// Sample `i`: T + 1 tokens into `out`. Returns the error (out of range, a
  /// read failure or a token outside `vocabulary`), or nullopt.
  std::optional<std::string> read(int64_t i, uint32_t *out, uint64_t vocabulary) const;

private:
  GptSampleIndex(const IndexedDataset &dataset, int seqLen) : dataset(&dataset), seqLen(seqLen) {}

  const IndexedDataset *dataset;
  int seqLen;
  int epochCount = 1;
  std::vector<int32_t> documentIndex;              ///< sequence ids, epoch after epoch
  std::vector<std::pair<int64_t, int64_t>> starts; ///< (document index position, offset)
  std::vector<int64_t> shuffle;
};

} // namespace mist::rt
