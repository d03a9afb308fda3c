//===- TokenFile.cpp - Token files in llm.c's format ----------------------===//
#include "runtime/data/TokenFile.h"

#include "runtime/data/ReadExactly.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace mist::rt {

namespace {

std::string systemError() { return std::strerror(errno); }

int32_t readInt32LE(const unsigned char *p) {
  return int32_t(uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
                 uint32_t(p[3]) << 24);
}

void writeInt32LE(unsigned char *p, int32_t v) {
  uint32_t u = uint32_t(v);
  for (int i = 0; i < 4; ++i)
    p[i] = static_cast<unsigned char>(u >> (8 * i));
}

bool writeAll(int fd, const unsigned char *data, size_t n) {
  while (n > 0) {
    ssize_t put = ::write(fd, data, n);
    if (put < 0 && errno == EINTR)
      continue;
    if (put < 0)
      return false;
    data += put, n -= size_t(put);
  }
  return true;
}

constexpr TokenFormat kFormats[] = {TokenFormat::Gpt2, TokenFormat::Llama3, TokenFormat::Uint32};

const char *tokenTypeName(int tokenBytes) { return tokenBytes == 2 ? "uint16" : "uint32"; }

/// What the known headers are, for a message about one that is not.
std::string knownHeaders() {
  std::string s;
  for (TokenFormat f : kFormats) {
    const TokenFormatInfo &i = tokenFormatInfo(f);
    s += std::string(s.empty() ? "" : ", ") + std::to_string(i.magic) + " version " +
         std::to_string(i.version) + " (" + i.name + ")";
  }
  return s;
}

} // namespace

const TokenFormatInfo &tokenFormatInfo(TokenFormat format) {
  static const TokenFormatInfo gpt2{20240520, 1, 2, "llm.c GPT-2, uint16 tokens"};
  static const TokenFormatInfo llama3{20240801, 7, 4, "llm.c LLaMA-3, uint32 tokens"};
  static const TokenFormatInfo uint32{20240520, 2, 4, "uint32 tokens"};
  switch (format) {
  case TokenFormat::Gpt2:
    return gpt2;
  case TokenFormat::Llama3:
    return llama3;
  case TokenFormat::Uint32:
    break;
  }
  return uint32;
}

std::optional<TokenFile> TokenFile::open(const std::string &path, std::string &error) {
  TokenFile file;
  file.filePath = path;
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer; the
  // regular-file check below refuses it instead (no effect on regular files).
  file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  const int fd = file.fd;
  if (fd < 0) {
    error = "cannot open token file " + path + ": " + systemError();
    return std::nullopt;
  }

  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    error = "cannot stat token file " + path + ": " + systemError();
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) {
    error = path + ": not a regular file";
    return std::nullopt;
  }
  const int64_t fileBytes = st.st_size;
  if (fileBytes < kTokenFileHeaderBytes) {
    error = path + ": " + std::to_string(fileBytes) + " bytes, too short for the " +
            std::to_string(kTokenFileHeaderBytes) + "-byte token file header";
    return std::nullopt;
  }

  unsigned char header[kTokenFileHeaderBytes];
  if (!readExactly(fd, header, sizeof header, 0)) {
    error = "cannot read the header of token file " + path + ": " +
            (errno ? systemError() : std::string("file shrank while reading"));
    return std::nullopt;
  }
  const int32_t magic = readInt32LE(header);
  const int32_t version = readInt32LE(header + 4);
  const int32_t count = readInt32LE(header + 8);
  const int32_t vocabulary = readInt32LE(header + 12);
  bool magicKnown = false;
  std::optional<TokenFormat> format;
  for (TokenFormat f : kFormats) {
    const TokenFormatInfo &i = tokenFormatInfo(f);
    magicKnown |= i.magic == magic;
    if (i.magic == magic && i.version == version)
      format = f;
  }
  if (!magicKnown) {
    error = path + ": bad magic number " + std::to_string(magic) +
            ": not a token file (known headers: magic " + knownHeaders() + ")";
    return std::nullopt;
  }
  if (!format) {
    error = path + ": unknown token file version " + std::to_string(version) + " for magic " +
            std::to_string(magic) + " (known headers: magic " + knownHeaders() + ")";
    return std::nullopt;
  }
  if (count < 2) {
    error = path + ": the header's token count is " + std::to_string(count) +
            ", but a token file needs at least 2 (an input and its target)";
    return std::nullopt;
  }
  const int tokenBytes = tokenFormatInfo(*format).tokenBytes;
  const int64_t expectedBytes = kTokenFileHeaderBytes + int64_t(count) * tokenBytes;
  if (fileBytes != expectedBytes) {
    error = path + ": file size is " + std::to_string(fileBytes) + " bytes, but the header's " +
            std::to_string(count) + " " + tokenTypeName(tokenBytes) + " tokens need " +
            std::to_string(expectedBytes) + " (" + std::to_string(kTokenFileHeaderBytes) +
            "-byte header + " + std::to_string(count) + " * " + std::to_string(tokenBytes) + ")" +
            (fileBytes < expectedBytes ? ": the file is truncated" : ": trailing bytes");
    return std::nullopt;
  }

  if (vocabulary < 0) {
    error = path + ": the header's vocabulary size is " + std::to_string(vocabulary) +
            " (0 when not recorded, else the tokenizer's vocabulary)";
    return std::nullopt;
  }

  file.fileFormat = *format;
  file.count = count;
  file.vocabularySize = vocabulary;
  return file;
}

TokenFile::TokenFile(TokenFile &&other) noexcept { *this = std::move(other); }

TokenFile &TokenFile::operator=(TokenFile &&other) noexcept {
  if (this != &other) {
    if (fd >= 0)
      ::close(fd);
    filePath = std::move(other.filePath);
    fileFormat = other.fileFormat;
    count = std::exchange(other.count, 0);
    vocabularySize = other.vocabularySize;
    fd = std::exchange(other.fd, -1);
  }
  return *this;
}

TokenFile::~TokenFile() {
  if (fd >= 0)
    ::close(fd);
}

std::optional<std::string> TokenFile::read(int64_t begin, int64_t n, uint32_t *out) const {
  if (begin < 0 || n < 0 || begin + n > count)
    return filePath + ": tokens [" + std::to_string(begin) + ", " + std::to_string(begin + n) +
           ") are outside the file's " + std::to_string(count);
  const int bytes = tokenBytes();
  std::vector<unsigned char> raw(size_t(n) * size_t(bytes));
  if (!readExactly(fd, raw.data(), raw.size(), off_t(kTokenFileHeaderBytes + begin * bytes)))
    return "cannot read tokens [" + std::to_string(begin) + ", " + std::to_string(begin + n) +
           ") of " + filePath + ": " +
           (errno ? systemError()
                  : std::string("the file is shorter than when it was opened (it changed while "
                                "training)"));
  const unsigned char *p = raw.data();
  for (int64_t i = 0; i < n; ++i, p += bytes) {
    uint32_t t = uint32_t(p[0]) | uint32_t(p[1]) << 8;
    if (bytes == 4)
      t |= uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
    out[i] = t;
  }
  return std::nullopt;
}

std::optional<std::string> TokenFile::checkVocabulary(uint32_t vocabulary,
                                                      uint64_t *tokensHash) const {
  constexpr int64_t kChunk = int64_t(1) << 20;
  std::vector<uint32_t> tokens(size_t(std::min(count, kChunk)));
  uint64_t hash = 14695981039346656037ull; // FNV-1a over each token's four bytes
  for (int64_t begin = 0; begin < count; begin += kChunk) {
    const int64_t n = std::min(kChunk, count - begin);
    if (auto error = read(begin, n, tokens.data()))
      return error;
    for (int64_t i = 0; i < n; ++i)
      for (int byte = 0; byte < 4; ++byte) {
        hash ^= (tokens[size_t(i)] >> (8 * byte)) & 0xffu;
        hash *= 1099511628211ull;
      }
    if (tokensHash)
      *tokensHash = hash;
    for (int64_t i = 0; i < n; ++i)
      if (tokens[size_t(i)] >= vocabulary)
        return filePath + ": token " + std::to_string(tokens[size_t(i)]) + " at position " +
               std::to_string(begin + i) + " is outside the model's vocabulary of " +
               std::to_string(vocabulary);
  }
  return std::nullopt;
}

std::optional<std::string> writeTokenFile(const std::string &path,
                                          const std::vector<uint32_t> &tokens, TokenFormat format) {
  const TokenFormatInfo &info = tokenFormatInfo(format);
  if (tokens.size() < 2)
    return path + ": token count " + std::to_string(tokens.size()) +
           ", but a token file needs at least 2";
  if (tokens.size() > size_t(std::numeric_limits<int32_t>::max()))
    return path + ": " + std::to_string(tokens.size()) +
           " tokens do not fit the header's int32 count";
  const int tokenBytes = info.tokenBytes;
  std::vector<unsigned char> bytes(size_t(kTokenFileHeaderBytes) + tokens.size() * tokenBytes);
  writeInt32LE(bytes.data(), info.magic);
  writeInt32LE(bytes.data() + 4, info.version);
  writeInt32LE(bytes.data() + 8, int32_t(tokens.size()));
  unsigned char *p = bytes.data() + kTokenFileHeaderBytes;
  for (size_t i = 0; i < tokens.size(); ++i, p += tokenBytes) {
    uint32_t t = tokens[i];
    if (tokenBytes == 2 && t > 0xFFFF)
      return path + ": token " + std::to_string(t) + " at position " + std::to_string(i) +
             " does not fit GPT-2's uint16 tokens (write a LLaMA-3 file)";
    for (int b = 0; b < tokenBytes; ++b)
      p[b] = static_cast<unsigned char>(t >> (8 * b));
  }

  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return "cannot create token file " + path + ": " + systemError();
  bool written = writeAll(fd, bytes.data(), bytes.size());
  std::string why = written ? "" : systemError();
  if (::close(fd) != 0 && written) {
    written = false;
    why = systemError();
  }
  if (!written)
    return "cannot write token file " + path + ": " + why;
  return std::nullopt;
}

} // namespace mist::rt
