//===- TokenFile.h - Token files in llm.c's format ------------------------===//
/// \file
/// A token file is a header of 256 little-endian int32 followed by the
/// tokens: header[0] is a magic number, header[1] a version, header[2] the
/// number of tokens; the rest of the header is unused (zero) except, in
/// files scripts/make-tokens.py writes, header[3]: the size of the
/// vocabulary the tokens were made with (llm.c leaves it 0; 0 is "not
/// recorded"). The trainer refuses a file made for a larger vocabulary
/// than its model's. The pair
/// (magic, version) names the token type (TokenFormat): llm.c's data
/// scripts write GPT-2 files (20240520, 1: uint16) and LLaMA-3 files
/// (20240801, 7: uint32); (20240520, 2) is this project's uint32 variant of
/// the GPT-2 header, which earlier mistc versions wrote.
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

inline constexpr int kTokenFileHeaderInts = 256;
inline constexpr int64_t kTokenFileHeaderBytes = kTokenFileHeaderInts * 4;

/// The headers a token file may have.
enum class TokenFormat {
  Gpt2,   ///< llm.c's GPT-2 files: magic 20240520, version 1, uint16 tokens
  Llama3, ///< llm.c's LLaMA-3 files: magic 20240801, version 7, uint32 tokens
  Uint32, ///< magic 20240520, version 2, uint32 tokens (earlier mistc versions)
};
struct TokenFormatInfo {
  int32_t magic, version;
  int tokenBytes;
  const char *name; ///< for messages and logs
};
const TokenFormatInfo &tokenFormatInfo(TokenFormat format);

class TokenFile {
public:
  /// Opens `path` and checks it: the header is complete, the (magic,
  /// version) pair is a TokenFormat, the token count is at least 2 and the file size is
  /// exactly header + count * tokenBytes. Otherwise nullopt, and `error`
  /// names the file and what is wrong.
  static std::optional<TokenFile> open(const std::string &path, std::string &error);

  TokenFile(TokenFile &&other) noexcept;
  TokenFile &operator=(TokenFile &&other) noexcept;
  TokenFile(const TokenFile &) = delete;
  TokenFile &operator=(const TokenFile &) = delete;
  ~TokenFile();

  const std::string &path() const { return filePath; }
  TokenFormat format() const { return fileFormat; }
  int tokenBytes() const { return tokenFormatInfo(fileFormat).tokenBytes; }
  int64_t size() const { return count; }
  /// header[3]: the tokenizer's vocabulary size, 0 when not recorded.
  int64_t vocabulary() const { return vocabularySize; }

  /// Tokens [begin, begin + n) into `out` (the range must be inside the
  /// file). Returns the error (the file changed since it was opened, or an
  /// I/O error), or nullopt.
  std::optional<std::string> read(int64_t begin, int64_t n, uint32_t *out) const;

  /// nullopt when every token is below `vocabulary`; otherwise the first
  /// token outside it, its position and the file (an embedding lookup with
  /// it would read out of bounds), or a read error. Reads the whole file,
  /// and gives the FNV-1a hash of its token values on the way (`tokensHash`,
  /// when not null): what a resumed run compares, whatever the file's path.
  std::optional<std::string> checkVocabulary(uint32_t vocabulary,
                                             uint64_t *tokensHash = nullptr) const;

private:
  TokenFile() = default;

  std::string filePath;
  TokenFormat fileFormat = TokenFormat::Gpt2;
  int64_t count = 0;
  int64_t vocabularySize = 0;
  int fd = -1; ///< open from open() to the destructor
};

/// Writes `tokens` as a token file of `format` for tests and tools. Returns
/// the error (a token too large for GPT-2's uint16, a count below 2 or above
/// what the int32 header holds, an I/O failure), or nullopt.
std::optional<std::string> writeTokenFile(const std::string &path,
                                          const std::vector<uint32_t> &tokens, TokenFormat format);

} // namespace mist::rt
