//===- IndexedDataset.h - Megatron-LM's indexed datasets (.bin + .idx) ----===//
/// \file
/// The token corpora of Megatron-LM, NeMo and GPT-NeoX, as written by
/// Megatron-LM's tools/preprocess_data.py: PREFIX.bin holds the tokens of
/// every sequence back to back in one integer type, PREFIX.idx describes
/// them. The index is, little-endian:
///
///   "MMIDIDX\0\0"  version (uint64, 1)  dtype code (uint8)
///   sequence count S (uint64)  document count D (uint64)
///   sequence lengths    int32[S]  (tokens)
///   sequence pointers   int64[S]  (byte offsets into .bin)
///   document indices    int64[D]  (the first sequence of each document,
///                                  then S: D - 1 documents)
///
/// dtype codes: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64,
/// 7 float32, 8 uint16 (token files use the integer ones). A GPT dataset
/// samples sequences; preprocess_data.py without --split-sentences writes
/// one sequence per document.
///
/// The index is mapped (read-only; the sample index is built from its
/// lengths); tokens are read with pread when a batch needs them, so a .bin
/// that shrinks while training reports an error. Every inconsistency
/// between the two files is reported when they are opened.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

namespace mist::rt {

class IndexedDataset {
public:
  /// Opens PREFIX.idx and PREFIX.bin (a prefix given as PREFIX.bin or
  /// PREFIX.idx is taken too) and checks them. nullopt otherwise, with
  /// `error` naming the file and what is wrong.
  static std::optional<IndexedDataset> open(const std::string &prefix, std::string &error);

  IndexedDataset(IndexedDataset &&other) noexcept;
  IndexedDataset &operator=(IndexedDataset &&other) noexcept;
  IndexedDataset(const IndexedDataset &) = delete;
  IndexedDataset &operator=(const IndexedDataset &) = delete;
  ~IndexedDataset();

  const std::string &prefix() const { return pathPrefix; }
  int64_t sequenceCount() const { return sequences; }
  int64_t documentCount() const { return documents - 1; }
  int tokenBytes() const { return itemBytes; }
  const char *dtypeName() const;
  /// Tokens in all sequences together.
  int64_t tokenCount() const { return tokens; }

  int32_t sequenceLength(int64_t i) const { return load<int32_t>(lengthsAt + 4 * i); }
  int64_t sequencePointer(int64_t i) const { return load<int64_t>(pointersAt + 8 * i); }

  /// Tokens [offset, offset + n) of sequence `sequence` into `out` (the range
  /// must be inside the sequence). Returns the error (an I/O error, the .bin
  /// changed, a token below 0 or not below `vocabulary`), or nullopt.
  std::optional<std::string> read(int64_t sequence, int64_t offset, int64_t n, uint32_t *out,
                                  uint64_t vocabulary) const;

  /// FNV-1a of the index file's bytes and the .bin's size: what a resumed
  /// run compares, whatever the files' paths.
  uint64_t fingerprint() const;

private:
  IndexedDataset() = default;
  template <typename T> T load(size_t at) const {
    T v;
    std::memcpy(&v, mapped + at, sizeof v); // the arrays start unaligned (offset 34)
    return v;
  }

  std::string pathPrefix;
  const unsigned char *mapped = nullptr; ///< the whole .idx
  size_t mappedBytes = 0;
  int binFd = -1;
  int64_t binBytes = 0;
  int dtypeCode = 0, itemBytes = 0;
  int64_t sequences = 0, documents = 0, tokens = 0;
  size_t lengthsAt = 0, pointersAt = 0, documentsAt = 0;
};

} // namespace mist::rt
