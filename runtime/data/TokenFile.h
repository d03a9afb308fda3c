//===- TokenFile.h - Token files in llm.c's format ------------------------===//
/// \file
/// A token file is a header of 256 little-endian int32 followed by the
/// tokens: header[0] is the magic 20240520, header[1] the version (1: uint16
/// tokens, 2: uint32 tokens), header[2] the number of tokens; the rest of the
/// header is unused (zero). This is the format of llm.c's data scripts for
/// GPT-2 (version 1); version 2 is the same header with 4-byte tokens.
///
/// TokenFile keeps the file open and reads the tokens a batch needs when it
/// needs them (pread), so a data set of billions of tokens costs no memory
/// up front and the ranks of a node share the page cache. It does not map
/// the file: a mapped file that shrinks while training (rewritten, or cut
/// short) would end the job with SIGBUS; a read reports it instead. Every
/// inconsistency in the file is reported when it is opened.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mist::rt {

inline constexpr int32_t kTokenFileMagic = 20240520;
inline constexpr int kTokenFileHeaderInts = 256;
inline constexpr int64_t kTokenFileHeaderBytes = kTokenFileHeaderInts * 4;

class TokenFile {
public:
  /// Maps `path` and checks it: the header is complete, the magic and
  /// version are known, the token count is at least 2 and the file size is
  /// exactly header + count * tokenBytes. Otherwise nullopt, and `error`
  /// names the file and what is wrong.
  static std::optional<TokenFile> open(const std::string &path, std::string &error);

  TokenFile(TokenFile &&other) noexcept;
  TokenFile &operator=(TokenFile &&other) noexcept;
  TokenFile(const TokenFile &) = delete;
  TokenFile &operator=(const TokenFile &) = delete;
  ~TokenFile();

  const std::string &path() const { return filePath; }
  int version() const { return fileVersion; }
  int tokenBytes() const { return fileVersion == 1 ? 2 : 4; }
  int64_t size() const { return count; }

  /// Tokens [begin, begin + n) into `out` (the range must be inside the
  /// file). Returns the error (the file changed since it was opened, or an
  /// I/O error), or nullopt.
  std::optional<std::string> read(int64_t begin, int64_t n, uint32_t *out) const;

  /// nullopt when every token is below `vocabulary`; otherwise the first
  /// token outside it, its position and the file (an embedding lookup with
  /// it would read out of bounds), or a read error. Reads the whole file.
  std::optional<std::string> checkVocabulary(uint32_t vocabulary) const;

private:
  TokenFile() = default;

  std::string filePath;
  int fileVersion = 0;
  int64_t count = 0;
  int fd = -1; ///< open from open() to the destructor
};

/// Writes `tokens` as a token file of `version` (1: uint16, 2: uint32) for
/// tests and tools. Returns the error (a token too large for version 1, a
/// count below 2 or above what the int32 header holds, an unknown version,
/// an I/O failure), or nullopt.
std::optional<std::string> writeTokenFile(const std::string &path,
                                          const std::vector<uint32_t> &tokens, int version);

} // namespace mist::rt
