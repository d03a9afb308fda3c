//===- GptSampleIndex.cpp - Megatron-LM's GPT sample order over one dataset ===//
#include "runtime/data/GptSampleIndex.h"

#include "runtime/data/NumpyRandomState.h"

#include <numeric>

namespace mist::rt {

namespace {

/// The split's sequences `epochs` times over, shuffled as one array.
std::vector<int32_t> shuffledEpochs(int64_t first, int64_t end, int epochs,
                                    NumpyRandomState &random) {
  std::vector<int32_t> index;
  index.reserve(size_t(epochs) * size_t(end - first));
  for (int e = 0; e < epochs; ++e)
    for (int64_t s = first; s < end; ++s)
      index.push_back(int32_t(s));
  random.shuffle(index);
  return index;
}

std::vector<int64_t> shuffledRange(int64_t begin, int64_t end, NumpyRandomState &random) {
  std::vector<int64_t> range(size_t(end - begin));
  std::iota(range.begin(), range.end(), begin);
  random.shuffle(range);
  return range;
}

} // namespace

std::optional<GptSampleIndex> GptSampleIndex::build(const IndexedDataset &dataset,
                                                    const GptSampleRequest &request,
                                                    std::string &error) {
  const std::string &name = dataset.prefix();
  if (request.seqLen < 2) {
    error = name + ": Megatron-LM's GPT samples need a sequence length of at least 2";
    return std::nullopt;
  }
  if (request.firstSequence < 0 || request.endSequence > dataset.sequenceCount() ||
      request.endSequence <= request.firstSequence) {
    error = name + ": the split [" + std::to_string(request.firstSequence) + ", " +
            std::to_string(request.endSequence) + ") of its " +
            std::to_string(dataset.sequenceCount()) + " sequences holds none";
    return std::nullopt;
  }
  if (request.samples && *request.samples < 1) {
    error = name + ": asked for " + std::to_string(*request.samples) + " samples";
    return std::nullopt;
  }
  GptSampleIndex g(dataset, request.seqLen);
  const int64_t T = request.seqLen;
  int64_t tokensPerEpoch = 0;
  for (int64_t s = request.firstSequence; s < request.endSequence; ++s)
    tokensPerEpoch += dataset.sequenceLength(s);
  if (tokensPerEpoch < T + 1) {
    error = name + ": the split's " + std::to_string(tokensPerEpoch) +
            " tokens are too few for one sample of " + std::to_string(T + 1) +
            " (a sequence and its next token)";
    return std::nullopt;
  }

  // Epochs: enough for samples * T tokens and the last sample's next token.
  int64_t epochs = 1;
  if (request.samples) {
    const int64_t wanted = *request.samples * T + 1;
    epochs = (wanted + tokensPerEpoch - 1) / tokensPerEpoch;
  }
  if (epochs * (request.endSequence - request.firstSequence) > int64_t(INT32_MAX)) {
    error = name + ": " + std::to_string(epochs) + " epochs of the split are more than the " +
            "document index holds (2^31 - 1 entries); ask for fewer samples";
    return std::nullopt;
  }
  g.epochCount = int(epochs);

  bool separateFinalEpoch = false;
  int64_t samplesBeforeFinalEpoch = 0;
  if (epochs > 1) {
    samplesBeforeFinalEpoch = ((epochs - 1) * tokensPerEpoch - 1) / T;
    const int64_t fromFinalEpoch = *request.samples - samplesBeforeFinalEpoch;
    const int64_t perEpoch = (tokensPerEpoch - 1) / T;
    separateFinalEpoch = fromFinalEpoch < int64_t(0.80 * double(perEpoch));
  }

  NumpyRandomState random(request.seed);
  if (separateFinalEpoch) {
    g.documentIndex =
        shuffledEpochs(request.firstSequence, request.endSequence, int(epochs - 1), random);
    const std::vector<int32_t> last =
        shuffledEpochs(request.firstSequence, request.endSequence, 1, random);
    g.documentIndex.insert(g.documentIndex.end(), last.begin(), last.end());
  } else {
    g.documentIndex =
        shuffledEpochs(request.firstSequence, request.endSequence, int(epochs), random);
  }

  // Windows of T + 1 tokens, each starting on the previous one's last token.
  const int64_t samples = (epochs * tokensPerEpoch - 1) / T;
  g.starts.reserve(size_t(samples) + 1);
  int64_t position = 0, offset = 0;
  g.starts.emplace_back(position, offset);
  const int64_t lastPosition = int64_t(g.documentIndex.size()) - 1;
  while (int64_t(g.starts.size()) <= samples) {
    int64_t remaining = T + 1;
    while (remaining != 0) {
      const int64_t length = dataset.sequenceLength(g.documentIndex[size_t(position)]) - offset;
      remaining -= length;
      if (remaining <= 0) {
        offset += remaining + length - 1;
        remaining = 0;
      } else if (position == lastPosition) {
        offset = dataset.sequenceLength(g.documentIndex[size_t(position)]) - 1;
        break;
      } else {
        ++position;
        offset = 0;
      }
    }
    g.starts.emplace_back(position, offset);
  }

  if (separateFinalEpoch) {
    g.shuffle = shuffledRange(0, samplesBeforeFinalEpoch, random);
    const std::vector<int64_t> rest = shuffledRange(samplesBeforeFinalEpoch, samples, random);
    g.shuffle.insert(g.shuffle.end(), rest.begin(), rest.end());
  } else {
    g.shuffle = shuffledRange(0, samples, random);
  }
  return g;
}

std::optional<std::string> GptSampleIndex::read(int64_t i, uint32_t *out,
                                                uint64_t vocabulary) const {
  if (i < 0 || i >= size())
    return dataset->prefix() + ": sample " + std::to_string(i) + " is outside the " +
           std::to_string(size()) + " samples of its split";
  const int64_t window = shuffle[size_t(i)];
  const auto [firstPosition, firstOffset] = starts[size_t(window)];
  const auto [lastPosition, lastOffset] = starts[size_t(window) + 1];
  int64_t written = 0;
  for (int64_t p = firstPosition; p <= lastPosition; ++p) {
    const int32_t sequence = documentIndex[size_t(p)];
    const int64_t from = p == firstPosition ? firstOffset : 0;
    const int64_t to = p == lastPosition ? lastOffset + 1 : dataset->sequenceLength(sequence);
    if (to - from > seqLen + 1 - written)
      break; // caught below
    if (auto failed = dataset->read(sequence, from, to - from, out + written, vocabulary))
      return failed;
    written += to - from;
  }
  if (written != seqLen + 1)
    return dataset->prefix() + ": sample " + std::to_string(i) + " holds " +
           std::to_string(written) + " tokens where " + std::to_string(seqLen + 1) +
           " were expected (the index and the data disagree)";
  return std::nullopt;
}

} // namespace mist::rt
