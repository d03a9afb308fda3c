//===- MegatronDataTest.cpp - Megatron-LM datasets: reader, order, blend --===//
/// The order itself is checked against Megatron-LM's own code in
/// tests/data/megatron-data-check.py; these tests pin numpy's draws, the
/// argument parsing, every refusal of a damaged index, and the invariants
/// of the sample index.
#include "runtime/data/MegatronData.h"
#include "runtime/data/BatchSampler.h"
#include "runtime/data/GptSampleIndex.h"
#include "runtime/data/IndexedDataset.h"
#include "runtime/data/NumpyRandomState.h"
#include "tests/runtime/data/TempDirectory.h"

#include <filesystem>
#include <gtest/gtest.h>
#include <numeric>

using namespace mist::rt;
using mist::rt::testing::readBytes;
using mist::rt::testing::TempDirectory;
using mist::rt::testing::writeBytes;

namespace {

void put(std::vector<unsigned char> &out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<unsigned char>(v >> (8 * i)));
}

/// Writes PREFIX.bin and PREFIX.idx as Megatron-LM's IndexedDatasetBuilder
/// does, one sequence per document, tokens of `bytes` bytes (dtype `code`).
void writeDataset(const std::string &prefix, const std::vector<std::vector<int64_t>> &documents,
                  int code = 8, int bytes = 2) {
  std::vector<unsigned char> bin, idx = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
  put(idx, 1, 8);
  idx.push_back(static_cast<unsigned char>(code));
  put(idx, documents.size(), 8);
  put(idx, documents.size() + 1, 8);
  for (const auto &d : documents)
    put(idx, d.size(), 4);
  uint64_t pointer = 0;
  for (const auto &d : documents) {
    put(idx, pointer, 8);
    pointer += d.size() * size_t(bytes);
  }
  for (size_t i = 0; i <= documents.size(); ++i)
    put(idx, i, 8);
  for (const auto &d : documents)
    for (int64_t t : d)
      put(bin, uint64_t(t), bytes);
  writeBytes(prefix + ".idx", idx);
  writeBytes(prefix + ".bin", bin);
}

std::string openError(const std::string &prefix) {
  std::string error;
  EXPECT_FALSE(IndexedDataset::open(prefix, error).has_value()) << prefix << " opened";
  return error;
}

std::vector<std::vector<int64_t>> countingDocuments(int count, int length) {
  std::vector<std::vector<int64_t>> docs;
  int64_t next = 0;
  for (int d = 0; d < count; ++d) {
    docs.emplace_back();
    for (int t = 0; t < length + d % 3; ++t)
      docs.back().push_back(next++ % 1000);
  }
  return docs;
}

} // namespace

// The values numpy 2.4 gives: RandomState(1234).shuffle(arange(10)) and
// RandomState(7).shuffle(arange(1000)).
TEST(NumpyRandomState, ShufflesAsNumpy) {
  std::vector<int32_t> small(10);
  std::iota(small.begin(), small.end(), 0);
  NumpyRandomState(1234).shuffle(small);
  EXPECT_EQ(small, (std::vector<int32_t>{7, 2, 9, 1, 0, 8, 4, 5, 6, 3}));

  std::vector<int64_t> large(1000);
  std::iota(large.begin(), large.end(), 0);
  NumpyRandomState(7).shuffle(large);
  EXPECT_EQ(std::vector<int64_t>(large.begin(), large.begin() + 8),
            (std::vector<int64_t>{778, 334, 271, 802, 216, 408, 812, 94}));
  EXPECT_EQ(std::vector<int64_t>(large.end() - 4, large.end()),
            (std::vector<int64_t>{502, 537, 196, 175}));
}

TEST(MegatronData, ParsesDataPathAsMegatron) {
  std::vector<std::string> prefixes;
  std::optional<std::vector<double>> weights;
  EXPECT_EQ(parseDataPath("corpus", prefixes, weights), std::nullopt);
  EXPECT_EQ(prefixes, std::vector<std::string>{"corpus"});
  EXPECT_FALSE(weights);
  EXPECT_EQ(parseDataPath(" 30 a  70 b ", prefixes, weights), std::nullopt);
  EXPECT_EQ(prefixes, (std::vector<std::string>{"a", "b"}));
  ASSERT_TRUE(weights);
  EXPECT_EQ(*weights, (std::vector<double>{30, 70}));
  EXPECT_EQ(parseDataPath("a b", prefixes, weights), std::nullopt); // sized blend
  EXPECT_EQ(prefixes, (std::vector<std::string>{"a", "b"}));
  EXPECT_FALSE(weights);

  auto refused = [&](const std::string &text, const std::string &says) {
    auto error = parseDataPath(text, prefixes, weights);
    ASSERT_TRUE(error) << text;
    EXPECT_NE(error->find(says), std::string::npos) << *error;
  };
  refused("", "names no dataset");
  refused("0.3 a b 0.7", "are not numbers");
  refused("0 a 1 b", "not a positive number");
  refused("-1 a 2 b", "not a positive number");
  refused("nan a 1 b", "not a positive number");
}

TEST(MegatronData, ParsesSplitAsMegatron) {
  double s[3];
  ASSERT_EQ(parseSplit("969, 30, 1", s), std::nullopt);
  EXPECT_DOUBLE_EQ(s[0], 0.969);
  EXPECT_DOUBLE_EQ(s[1], 0.030);
  ASSERT_EQ(parseSplit("98/2", s), std::nullopt);
  EXPECT_DOUBLE_EQ(s[0], 0.98);
  EXPECT_EQ(s[2], 0.0);
  EXPECT_TRUE(parseSplit("1,2,3,4", s));
  EXPECT_TRUE(parseSplit("0,1,0", s));
  EXPECT_TRUE(parseSplit("90,-5,5", s));
  EXPECT_TRUE(parseSplit("", s));
}

TEST(IndexedDataset, ReadsTokensOfEveryIntegerType) {
  TempDirectory tmp;
  struct Type {
    int code, bytes;
    int64_t largest;
  };
  for (Type t : {Type{1, 1, 255}, Type{2, 1, 127}, Type{3, 2, 32767}, Type{4, 4, 1 << 30},
                 Type{5, 8, 1 << 30}, Type{8, 2, 65535}}) {
    const std::string prefix = tmp.path("t" + std::to_string(t.code));
    writeDataset(prefix, {{0, 1, t.largest}, {t.largest - 1}}, t.code, t.bytes);
    std::string error;
    std::optional<IndexedDataset> d = IndexedDataset::open(prefix + ".bin", error);
    ASSERT_TRUE(d) << error;
    EXPECT_EQ(d->sequenceCount(), 2);
    EXPECT_EQ(d->documentCount(), 2);
    EXPECT_EQ(d->tokenCount(), 4);
    uint32_t out[3];
    ASSERT_EQ(d->read(0, 0, 3, out, uint64_t(1) << 32), std::nullopt);
    EXPECT_EQ(out[2], uint32_t(t.largest));
    ASSERT_EQ(d->read(1, 0, 1, out, uint64_t(1) << 32), std::nullopt);
    EXPECT_EQ(out[0], uint32_t(t.largest - 1));
    // A token at the vocabulary's size is refused, naming the file.
    auto bad = d->read(0, 2, 1, out, uint64_t(t.largest));
    ASSERT_TRUE(bad);
    EXPECT_NE(bad->find(prefix + ".bin"), std::string::npos) << *bad;
    EXPECT_NE(bad->find("outside the model's vocabulary"), std::string::npos) << *bad;
  }
  // A negative int8 token.
  writeDataset(tmp.path("neg"), {{5, -3}}, 2, 1);
  std::string error;
  auto d = IndexedDataset::open(tmp.path("neg"), error);
  ASSERT_TRUE(d) << error;
  uint32_t out[2];
  auto bad = d->read(0, 0, 2, out, 100);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("is -3"), std::string::npos) << *bad;
}

TEST(IndexedDataset, RefusesDamagedFiles) {
  TempDirectory tmp;
  const std::string good = tmp.path("good");
  writeDataset(good, {{1, 2, 3}, {4, 5}});
  const std::vector<unsigned char> idx = readBytes(good + ".idx"), bin = readBytes(good + ".bin");
  auto variant = [&](const std::string &name, std::vector<unsigned char> i,
                     std::vector<unsigned char> b) {
    writeBytes(tmp.path(name) + ".idx", i);
    writeBytes(tmp.path(name) + ".bin", b);
    return openError(tmp.path(name));
  };
  EXPECT_NE(openError(tmp.path("missing")).find("cannot open"), std::string::npos);
  std::filesystem::create_directory(tmp.path("folder.idx"));
  EXPECT_NE(openError(tmp.path("folder")).find("not a regular file"), std::string::npos);
  auto magic = idx;
  magic[0] = 'X';
  EXPECT_NE(variant("magic", magic, bin).find("not a Megatron-LM index"), std::string::npos);
  auto version = idx;
  version[9] = 2;
  EXPECT_NE(variant("version", version, bin).find("version 2"), std::string::npos);
  auto floats = idx;
  floats[17] = 7;
  EXPECT_NE(variant("float", floats, bin).find("float32"), std::string::npos);
  auto unknown = idx;
  unknown[17] = 9;
  EXPECT_NE(variant("code", unknown, bin).find("unknown token type"), std::string::npos);
  EXPECT_NE(variant("short", std::vector<unsigned char>(idx.begin(), idx.end() - 1), bin)
                .find("do not fill"),
            std::string::npos);
  EXPECT_NE(variant("header", std::vector<unsigned char>(idx.begin(), idx.begin() + 20), bin)
                .find("too few for an index header"),
            std::string::npos);
  EXPECT_NE(variant("bin", idx, std::vector<unsigned char>(bin.begin(), bin.end() - 2))
                .find("is not inside"),
            std::string::npos);
  auto documents = idx;
  documents[documents.size() - 8] = 9; // the last entry must be the sequence count
  EXPECT_NE(variant("docs", documents, bin).find("document entry"), std::string::npos);
  auto huge = idx;
  huge[18 + 7] = 0x40; // a sequence count no file holds
  EXPECT_NE(variant("count", huge, bin).find("do not fill"), std::string::npos);
}

TEST(GptSampleIndex, SamplesAreWindowsOfTheShuffledEpochs) {
  TempDirectory tmp;
  const auto docs = countingDocuments(50, 7); // tokens count up, so each token names its place
  writeDataset(tmp.path("d"), docs);
  std::string error;
  auto d = IndexedDataset::open(tmp.path("d"), error);
  ASSERT_TRUE(d) << error;
  for (int64_t samples : {10, 120, 400}) {
    GptSampleRequest r;
    r.endSequence = 50;
    r.samples = samples;
    r.seqLen = 8;
    r.seed = 1234;
    auto index = GptSampleIndex::build(*d, r, error);
    ASSERT_TRUE(index) << error;
    EXPECT_GE(index->size(), samples);
    // Every sample is T + 1 tokens, each run of tokens within a sequence
    // counting up; the samples together hold each epoch's tokens.
    std::vector<int64_t> seen(1000, 0);
    std::vector<uint32_t> out(9);
    for (int64_t i = 0; i < index->size(); ++i) {
      ASSERT_EQ(index->read(i, out.data(), 1000), std::nullopt);
      for (size_t t = 0; t + 1 < out.size(); ++t)
        ++seen[out[t]];
    }
    int64_t total = 0;
    for (int64_t c : seen)
      total += c;
    EXPECT_EQ(total, index->size() * 8);
    EXPECT_TRUE(index->read(index->size(), out.data(), 1000));
  }
  GptSampleRequest empty;
  empty.firstSequence = 3;
  empty.endSequence = 3;
  empty.seqLen = 8;
  EXPECT_FALSE(GptSampleIndex::build(*d, empty, error));
  EXPECT_NE(error.find("holds none"), std::string::npos) << error;
}

TEST(MegatronData, BlendFollowsTheWeightsAndIsDeterministic) {
  TempDirectory tmp;
  writeDataset(tmp.path("a"), countingDocuments(80, 20));
  writeDataset(tmp.path("b"), countingDocuments(30, 20));
  MegatronDataRequest r;
  r.dataPath = "0.75 " + tmp.path("a") + " 0.25 " + tmp.path("b");
  r.samples = 400;
  r.seqLen = 16;
  r.vocabulary = 1000;
  std::string error;
  auto first = MegatronData::open(r, error);
  ASSERT_TRUE(first) << error;
  auto again = MegatronData::open(r, error);
  ASSERT_TRUE(again) << error;
  EXPECT_EQ(first->size(), 400);
  EXPECT_EQ(first->fingerprint(), again->fingerprint());
  std::vector<uint32_t> x(17), y(17);
  for (int64_t j = 0; j < first->size(); ++j) {
    ASSERT_EQ(first->read(j, x.data()), std::nullopt);
    ASSERT_EQ(again->read(j, y.data()), std::nullopt);
    ASSERT_EQ(x, y) << "sample " << j;
  }
  EXPECT_TRUE(first->read(400, x.data()));
  r.seed = 1;
  auto reseeded = MegatronData::open(r, error);
  ASSERT_TRUE(reseeded) << error;
  EXPECT_NE(reseeded->fingerprint(), first->fingerprint());

  // Too few samples for the run: the sampler says so before training.
  MegatronDataRequest sized = r;
  sized.dataPath = tmp.path("a") + " " + tmp.path("b"); // one epoch of each
  sized.samples = 1000000;
  auto oneEpoch = MegatronData::open(sized, error);
  ASSERT_TRUE(oneEpoch) << error;
  EXPECT_LT(oneEpoch->size(), 1000000);
  EXPECT_FALSE(BatchSampler::create(*oneEpoch, {1, 4, 2, 16}, 1000000 / 8, error));
  EXPECT_NE(error.find("need more than"), std::string::npos) << error;
}

// Sequence k of step s is Megatron-LM's sample s * B + k, and micro-batch m
// of dp rank r holds samples (m * R + r) * b + [0, b), as Megatron-LM's
// sampler hands them out.
TEST(MegatronData, BatchSamplerReadsSamplesInMegatronOrder) {
  TempDirectory tmp;
  writeDataset(tmp.path("a"), countingDocuments(60, 25));
  MegatronDataRequest r;
  r.dataPath = tmp.path("a");
  r.seqLen = 16;
  r.vocabulary = 1000;
  const BatchShape shape{2, 3, 2, 16}; // R, b, G, T: B = 12
  r.samples = 3 * shape.globalBatch();
  std::string error;
  auto data = MegatronData::open(r, error);
  ASSERT_TRUE(data) << error;
  auto sampler = BatchSampler::create(*data, shape, 3, error);
  ASSERT_TRUE(sampler) << error;
  std::vector<uint32_t> inputs(3 * 16), targets(3 * 16), sample(17);
  for (int step = 0; step < 3; ++step)
    for (int m = 0; m < 2; ++m)
      for (int rank = 0; rank < 2; ++rank) {
        ASSERT_EQ(sampler->fill(step, m, rank, inputs.data(), targets.data()), std::nullopt);
        for (int row = 0; row < 3; ++row) {
          ASSERT_EQ(data->read(step * 12 + (m * 2 + rank) * 3 + row, sample.data()), std::nullopt);
          EXPECT_TRUE(std::equal(sample.begin(), sample.end() - 1, inputs.begin() + row * 16));
          EXPECT_TRUE(std::equal(sample.begin() + 1, sample.end(), targets.begin() + row * 16));
        }
      }
}
