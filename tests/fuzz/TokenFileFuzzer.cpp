//===- TokenFileFuzzer.cpp - libFuzzer target for the token-file reader ---===//
/// \file
/// Feeds arbitrary bytes, as a file, to mist::rt::TokenFile::open
/// (runtime/data/TokenFile.h, how the trainer reads --data) and, when the
/// file opens, to the batch sampler over it. Traps when an invariant breaks:
///
///  - an opened file's (magic, version) is its format's, its size() is the
///    header's count, at least 2, and the file is exactly the 1024-byte
///    header plus size() tokens;
///  - read() of every token gives the little-endian tokens after the
///    header; reads outside [0, size()) are errors, not reads;
///  - checkVocabulary(max + 1) passes and checkVocabulary(max) fails (max
///    the largest token);
///  - writeTokenFile of the tokens gives the input back byte for byte, but
///    for the header's unused ints, which it writes as zeros;
///  - BatchSampler, with its shape, shuffle seed and step taken from the
///    header's unused ints 3-7 (which the reader ignores): it accepts the
///    shape exactly when the file holds T + 1 tokens; every sequence of the
///    step starts inside the file with room for its T inputs and the next
///    token, and its inputs and targets are the file's tokens there and one
///    further on; shuffled, step 0's first W sequences (W windows of T + 1
///    tokens) start at W different windows.
///
/// The input reaches the reader through an in-memory file (MemFile.h).
/// Built only with -DMIST_FUZZ=ON (docs/fuzzing.md).
//===----------------------------------------------------------------------===//
#include "runtime/data/BatchSampler.h"
#include "runtime/data/TokenFile.h"
#include "tests/fuzz/MemFile.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

using namespace mist::rt;

namespace {

uint32_t le32(const uint8_t *p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

void checkSampler(const TokenFile &file, const std::vector<uint32_t> &tokens,
                  const uint8_t *header) {
  const int64_t n = file.size();
  BatchShape shape;
  shape.dp = 1 + header[12] % 4;
  shape.microBatch = 1 + header[13] % 4;
  shape.gradAccum = 1 + header[14] % 4;
  shape.seqLen = 1 + int(le32(header + 16) % uint32_t(n)); // [1, n]: n itself is refused
  const bool shuffled = header[15] & 1;
  const uint64_t seed = uint64_t(le32(header + 20)) << 32 | le32(header + 24);
  const int64_t step = le32(header + 28) & 0x7FFFFFFF; // any realistic step count

  std::string error;
  std::optional<BatchSampler> sampler = BatchSampler::create(file, shape, error);
  if (!sampler) {
    if (n >= int64_t(shape.seqLen) + 1)
      __builtin_trap(); // refused a valid shape
    return;
  }
  if (n < int64_t(shape.seqLen) + 1)
    __builtin_trap(); // accepted a file too short for one window
  if (shuffled)
    sampler->shuffle(seed);
  const int64_t T = shape.seqLen;

  for (int m = 0; m < shape.gradAccum; ++m)
    for (int r = 0; r < shape.dp; ++r) {
      std::optional<MicroBatch> batch = sampler->sample(step, m, r, error);
      if (!batch || batch->inputs.size() != size_t(shape.microBatch * T) ||
          batch->targets.size() != batch->inputs.size())
        __builtin_trap(); // an unchanged file could not be sampled
      for (int row = 0; row < shape.microBatch; ++row) {
        const int64_t start = sampler->sequenceStart(step, sampler->sequenceIndex(m, r, row));
        if (start < 0 || start + T + 1 > n)
          __builtin_trap(); // a window outside the file
        for (int64_t t = 0; t < T; ++t)
          if (batch->inputs[size_t(row * T + t)] != tokens[size_t(start + t)] ||
              batch->targets[size_t(row * T + t)] != tokens[size_t(start + t + 1)])
            __builtin_trap(); // inputs/targets are not the file's tokens at the start
      }
    }

  if (shuffled) {
    // The first pass reads every window once.
    const int64_t windows = (n - 1) / T;
    if (windows > 4096)
      return;
    std::vector<bool> seen(size_t(windows), false);
    for (int64_t j = 0; j < windows; ++j) {
      const int64_t start = sampler->sequenceStart(0, j);
      if (start < 0 || start % T != 0 || start / T >= windows || seen[size_t(start / T)])
        __builtin_trap(); // not a permutation of the windows
      seen[size_t(start / T)] = true;
    }
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mist::fuzz::MemFile input("token-file-fuzz-input");
  input.assign(data, size);
  std::string error;
  std::optional<TokenFile> file = TokenFile::open(input.path(), error);
  if (!file) {
    if (error.empty())
      __builtin_trap(); // rejected without a reason
    return 0;
  }

  // What the reader accepted is what the header says.
  if (size < size_t(kTokenFileHeaderBytes))
    __builtin_trap();
  const TokenFormatInfo &info = tokenFormatInfo(file->format());
  if (int32_t(le32(data)) != info.magic || int32_t(le32(data + 4)) != info.version ||
      file->tokenBytes() != info.tokenBytes || (info.tokenBytes != 2 && info.tokenBytes != 4))
    __builtin_trap(); // the format is not the header's
  const int64_t n = file->size();
  if (n < 2 || n != int64_t(int32_t(le32(data + 8))) ||
      uint64_t(size) != uint64_t(kTokenFileHeaderBytes) + uint64_t(n) * uint64_t(info.tokenBytes))
    __builtin_trap(); // count or size inconsistent, yet opened

  // Every token, as the bytes say.
  std::vector<uint32_t> tokens(static_cast<size_t>(n));
  if (file->read(0, n, tokens.data()))
    __builtin_trap();
  uint32_t largest = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t *p = data + kTokenFileHeaderBytes + i * info.tokenBytes;
    const uint32_t expected = info.tokenBytes == 2 ? uint32_t(p[0]) | uint32_t(p[1]) << 8 : le32(p);
    if (tokens[size_t(i)] != expected)
      __builtin_trap(); // read() decoded a token wrongly
    largest = std::max(largest, expected);
  }
  uint32_t scratch[2];
  if (!file->read(n - 1, 2, scratch) || !file->read(-1, 1, scratch) || !file->read(0, -1, scratch))
    __builtin_trap(); // a read outside the file succeeded
  if (largest < UINT32_MAX && file->checkVocabulary(largest + 1))
    __builtin_trap(); // every token is below largest + 1
  if (!file->checkVocabulary(largest))
    __builtin_trap(); // the largest token is not below itself

  // The writer gives the same file, unused header ints zeroed.
  static const mist::fuzz::ScratchFile roundTrip("mist-token-fuzzer", "roundtrip.bin");
  const std::string &path = roundTrip.path();
  if (writeTokenFile(path, tokens, file->format()))
    __builtin_trap(); // the writer refuses what the reader accepted
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> written{std::istreambuf_iterator<char>(in),
                               std::istreambuf_iterator<char>()};
  static_cast<void>(::unlink(path.c_str())); // a crash below leaves only the empty folder
  std::vector<uint8_t> expected(data, data + size);
  std::fill(expected.begin() + 12, expected.begin() + kTokenFileHeaderBytes, 0);
  if (written != expected)
    __builtin_trap(); // read -> write does not give the file back

  checkSampler(*file, tokens, data);
  return 0;
}
