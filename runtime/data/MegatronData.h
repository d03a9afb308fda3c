//===- MegatronData.h - Megatron-LM's --data-path, --split and blending ---===//
/// \file
/// The training samples of a Megatron-LM run, in Megatron-LM's order, from
/// the same arguments (megatron/core/datasets/blended_megatron_dataset_*.py):
///
///   --data-path PREFIX                one dataset
///   --data-path "W1 PREFIX1 W2 PREFIX2 ..."
///                                     a blend: sample j comes from the
///                                     dataset whose share so far lags its
///                                     normalized weight most (ties to the
///                                     first); each dataset is asked for
///                                     ceil(ceil(n * w) * 1.005) samples
///   --data-path "PREFIX1 PREFIX2"     a blend weighted by the datasets'
///                                     sizes, one epoch of each
///   --split 969,30,1                  train/valid/test shares of each
///                                     dataset's sequences (train is the
///                                     first round(share * S) sequences)
///
/// Training reads the train split. n, the samples asked for, is what a
/// Megatron-LM run of the same length asks for: steps * global batch. It
/// decides the epochs and hence the order, so runs of another length read
/// other orders (as in Megatron-LM).
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/data/GptSampleIndex.h"
#include "runtime/data/IndexedDataset.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mist::rt {

struct MegatronDataRequest {
  std::string dataPath;             ///< Megatron-LM's --data-path, its words space-separated
  std::string split = "969,30,1";   ///< Megatron-LM's --split (its default)
  int64_t samples = 0;              ///< n: steps * global batch
  int seqLen = 1;                   ///< T
  uint32_t seed = 1234;             ///< Megatron-LM's --seed (its default)
  uint64_t vocabulary = UINT32_MAX; ///< tokens at or above it are refused when read
};

/// The blend's weights and prefixes as Megatron-LM reads --data-path:
/// an even number of words whose every other word is a number are weight
/// and prefix pairs; otherwise every word is a prefix (no weights). Returns
/// the error (no word, a weight that is not positive and finite, a mix of
/// numbers and paths), or nullopt.
std::optional<std::string> parseDataPath(const std::string &text,
                                         std::vector<std::string> &prefixes,
                                         std::optional<std::vector<double>> &weights);

/// Megatron-LM's --split as normalized shares (train, valid, test): the
/// numbers in the text (separated by commas, slashes or spaces), padded
/// with zeros to three. Returns the error, or nullopt.
std::optional<std::string> parseSplit(const std::string &text, double shares[3]);

class MegatronData {
public:
  static std::optional<MegatronData> open(const MegatronDataRequest &request, std::string &error);

  /// The samples training may read (at least the n asked for, or the
  /// blend's size when a blend without weights holds fewer).
  int64_t size() const { return blendSize; }

  /// Training sample `j`: T + 1 tokens (the inputs, then the last target).
  std::optional<std::string> read(int64_t j, uint32_t *out) const;

  /// One line for the log: datasets, weights, split, samples and epochs.
  std::string summary() const;

  /// What a resumed run compares: the indexes' bytes, the .bin sizes and
  /// every argument that decides the order.
  std::string fingerprint() const;

private:
  MegatronData() = default;

  struct Part {
    std::unique_ptr<IndexedDataset> dataset; ///< owned apart: the index points into it
    int64_t firstSequence = 0, endSequence = 0;
    std::optional<GptSampleIndex> samples;
  };
  MegatronDataRequest request;
  std::vector<Part> parts;
  std::vector<double> blendWeights; ///< empty for one dataset without a weight
  /// The blend's order: for training sample j, the dataset and its sample.
  std::vector<int16_t> datasetOf;
  std::vector<int64_t> sampleOf;
  int64_t blendSize = 0;
};

} // namespace mist::rt
