//===- TokenFileTest.cpp - llm.c token files: round trip and every error --===//
#include "runtime/data/TokenFile.h"
#include "runtime/data/BatchSampler.h"
#include "tests/runtime/data/TempDirectory.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace mist::rt;
using mist::rt::testing::readBytes;
using mist::rt::testing::TempDirectory;
using mist::rt::testing::writeBytes;

namespace {

/// Opens `path`, expecting failure; returns the error.
std::string openError(const std::string &path) {
  std::string error;
  std::optional<TokenFile> file = TokenFile::open(path, error);
  EXPECT_FALSE(file.has_value()) << path << " opened, but it should not";
  EXPECT_FALSE(error.empty());
  return error;
}

void setInt32(std::vector<unsigned char> &bytes, size_t offset, int32_t v) {
  for (int i = 0; i < 4; ++i)
    bytes[offset + i] = static_cast<unsigned char>(uint32_t(v) >> (8 * i));
}

} // namespace

TEST(TokenFile, RoundTripGpt2) {
  TempDirectory tmp;
  const std::string path = tmp.path("tokens.bin");
  std::vector<uint32_t> tokens = {0, 1, 2, 255, 256, 50256, 65535, 7};
  ASSERT_EQ(writeTokenFile(path, tokens, TokenFormat::Gpt2), std::nullopt);
  EXPECT_EQ(readBytes(path).size(), 1024u + tokens.size() * 2);

  std::string error;
  std::optional<TokenFile> file = TokenFile::open(path, error);
  ASSERT_TRUE(file) << error;
  EXPECT_EQ(file->format(), TokenFormat::Gpt2);
  EXPECT_EQ(file->tokenBytes(), 2);
  ASSERT_EQ(file->size(), int64_t(tokens.size()));
  std::vector<uint32_t> all(tokens.size());
  EXPECT_EQ(file->read(0, file->size(), all.data()), std::nullopt);
  EXPECT_EQ(all, tokens);
  std::vector<uint32_t> middle(3);
  EXPECT_EQ(file->read(3, 3, middle.data()), std::nullopt);
  EXPECT_EQ(middle, (std::vector<uint32_t>{255, 256, 50256}));
  EXPECT_EQ(file->read(6, 3, middle.data()), path + ": tokens [6, 9) are outside the file's 8");
}

/// Both uint32 headers: llm.c's LLaMA-3 files, and the GPT-2 header's
/// version 2 that earlier mistc versions wrote.
TEST(TokenFile, RoundTripUint32Formats) {
  for (TokenFormat format : {TokenFormat::Llama3, TokenFormat::Uint32}) {
    TempDirectory tmp;
    const std::string path = tmp.path("tokens32.bin");
    std::vector<uint32_t> tokens = {0, 65536, 128255, 4294967295u, 1};
    ASSERT_EQ(writeTokenFile(path, tokens, format), std::nullopt);
    EXPECT_EQ(readBytes(path).size(), 1024u + tokens.size() * 4);
    std::string error;
    std::optional<TokenFile> file = TokenFile::open(path, error);
    ASSERT_TRUE(file) << error;
    EXPECT_EQ(file->format(), format);
    EXPECT_EQ(file->tokenBytes(), 4);
    ASSERT_EQ(file->size(), int64_t(tokens.size()));
    std::vector<uint32_t> all(tokens.size());
    EXPECT_EQ(file->read(0, file->size(), all.data()), std::nullopt);
    EXPECT_EQ(all, tokens);
  }
}

/// The header of a LLaMA-3 file as llm.c's data scripts write it, byte by
/// byte: magic 20240801, version 7, the count, then uint32 tokens.
TEST(TokenFile, ReadsLlmcLlama3HeaderBytes) {
  TempDirectory tmp;
  const std::string path = tmp.path("llama3.bin");
  std::vector<unsigned char> bytes(1024 + 3 * 4, 0);
  setInt32(bytes, 0, 20240801);
  setInt32(bytes, 4, 7);
  setInt32(bytes, 8, 3);
  setInt32(bytes, 1024, 128000); // <|begin_of_text|>
  setInt32(bytes, 1028, 9906);
  setInt32(bytes, 1032, 128001);
  writeBytes(path, bytes);
  std::string error;
  std::optional<TokenFile> file = TokenFile::open(path, error);
  ASSERT_TRUE(file) << error;
  EXPECT_EQ(file->format(), TokenFormat::Llama3);
  std::vector<uint32_t> all(3);
  EXPECT_EQ(file->read(0, 3, all.data()), std::nullopt);
  EXPECT_EQ(all, (std::vector<uint32_t>{128000, 9906, 128001}));
  EXPECT_EQ(file->checkVocabulary(128256), std::nullopt);
  EXPECT_EQ(file->checkVocabulary(128001),
            path + ": token 128001 at position 2 is outside the model's vocabulary of 128001");
}

TEST(TokenFile, LayoutIsLlmCs) {
  TempDirectory tmp;
  const std::string path = tmp.path("layout.bin");
  ASSERT_EQ(writeTokenFile(path, {1, 258, 0xABCD}, TokenFormat::Gpt2), std::nullopt);
  std::vector<unsigned char> expected(1024 + 6, 0);
  const unsigned char start[] = {0x88, 0xD8, 0x34, 0x01, 1, 0, 0, 0, 3, 0, 0, 0};
  std::copy(std::begin(start), std::end(start), expected.begin());
  const unsigned char tokens[] = {0x01, 0x00, 0x02, 0x01, 0xCD, 0xAB};
  std::copy(std::begin(tokens), std::end(tokens), expected.begin() + 1024);
  EXPECT_EQ(readBytes(path), expected);
}

TEST(TokenFile, MovedFileStaysReadable) {
  TempDirectory tmp;
  const std::string path = tmp.path("tokens.bin");
  ASSERT_EQ(writeTokenFile(path, {5, 6, 7}, TokenFormat::Gpt2), std::nullopt);
  std::string error;
  std::optional<TokenFile> file = TokenFile::open(path, error);
  ASSERT_TRUE(file) << error;
  TokenFile moved = std::move(*file);
  EXPECT_EQ(moved.size(), 3);
  uint32_t token = 0;
  EXPECT_EQ(moved.read(2, 1, &token), std::nullopt);
  EXPECT_EQ(token, 7u);
  TokenFile assigned = std::move(moved);
  EXPECT_EQ(assigned.read(0, 1, &token), std::nullopt);
  EXPECT_EQ(token, 5u);
  EXPECT_EQ(assigned.path(), path);
}

TEST(TokenFile, CheckVocabulary) {
  TempDirectory tmp;
  const std::string path = tmp.path("tokens.bin");
  ASSERT_EQ(writeTokenFile(path, {3, 9, 50257, 4}, TokenFormat::Gpt2), std::nullopt);
  std::string error;
  std::optional<TokenFile> file = TokenFile::open(path, error);
  ASSERT_TRUE(file) << error;
  EXPECT_EQ(file->checkVocabulary(50258), std::nullopt);
  std::optional<std::string> outside = file->checkVocabulary(50257);
  ASSERT_TRUE(outside);
  EXPECT_EQ(*outside, path + ": token 50257 at position 2 is outside the model's vocabulary of "
                             "50257");
}

TEST(TokenFile, MissingFile) {
  TempDirectory tmp;
  const std::string path = tmp.path("absent.bin");
  EXPECT_EQ(openError(path), "cannot open token file " + path + ": No such file or directory");
}

TEST(TokenFile, DirectoryIsNotATokenFile) {
  TempDirectory tmp;
  EXPECT_EQ(openError(tmp.dir().string()), tmp.dir().string() + ": not a regular file");
}

TEST(TokenFile, AFifoIsRefusedWithoutWaitingForAWriter) {
  // Opening a FIFO for reading blocks until a writer comes; the trainer hung.
  TempDirectory tmp;
  const std::string path = tmp.path("fifo.bin");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  EXPECT_EQ(openError(path), path + ": not a regular file");
}

TEST(TokenFile, ShorterThanTheHeader) {
  TempDirectory tmp;
  const std::string path = tmp.path("short.bin");
  writeBytes(path, std::vector<unsigned char>(100, 0));
  EXPECT_EQ(openError(path), path + ": 100 bytes, too short for the 1024-byte token file header");
}

TEST(TokenFile, BadMagic) {
  TempDirectory tmp;
  const std::string path = tmp.path("magic.bin");
  ASSERT_EQ(writeTokenFile(path, {1, 2, 3}, TokenFormat::Gpt2), std::nullopt);
  std::vector<unsigned char> bytes = readBytes(path);
  setInt32(bytes, 0, 20240522);
  writeBytes(path, bytes);
  EXPECT_EQ(openError(path),
            path + ": bad magic number 20240522: not a token file " +
                "(known headers: magic 20240520 version 1 (llm.c GPT-2, uint16 tokens), 20240801 "
                "version 7 (llm.c LLaMA-3, uint32 tokens), 20240520 version 2 (uint32 tokens))");
}

TEST(TokenFile, BadVersion) {
  TempDirectory tmp;
  const std::string path = tmp.path("version.bin");
  ASSERT_EQ(writeTokenFile(path, {1, 2, 3}, TokenFormat::Gpt2), std::nullopt);
  std::vector<unsigned char> bytes = readBytes(path);
  setInt32(bytes, 4, 7); // LLaMA-3's version under GPT-2's magic
  writeBytes(path, bytes);
  EXPECT_EQ(openError(path),
            path + ": unknown token file version 7 for magic 20240520 " +
                "(known headers: magic 20240520 version 1 (llm.c GPT-2, uint16 tokens), 20240801 "
                "version 7 (llm.c LLaMA-3, uint32 tokens), 20240520 version 2 (uint32 tokens))");
}

TEST(TokenFile, TooFewTokens) {
  TempDirectory tmp;
  const std::string path = tmp.path("one.bin");
  std::vector<unsigned char> bytes(1024 + 2, 0);
  setInt32(bytes, 0, tokenFormatInfo(TokenFormat::Gpt2).magic);
  setInt32(bytes, 4, 1);
  setInt32(bytes, 8, 1);
  writeBytes(path, bytes);
  EXPECT_EQ(openError(path), path + ": the header's token count is 1, but a token file needs "
                                    "at least 2 (an input and its target)");
  setInt32(bytes, 8, -5);
  writeBytes(path, bytes);
  EXPECT_NE(openError(path).find("the header's token count is -5"), std::string::npos);
}

TEST(TokenFile, TruncatedFile) {
  TempDirectory tmp;
  const std::string path = tmp.path("truncated.bin");
  ASSERT_EQ(writeTokenFile(path, std::vector<uint32_t>(10, 42), TokenFormat::Gpt2), std::nullopt);
  std::vector<unsigned char> bytes = readBytes(path);
  bytes.resize(bytes.size() - 3);
  writeBytes(path, bytes);
  EXPECT_EQ(openError(path), path + ": file size is 1041 bytes, but the header's 10 uint16 tokens "
                                    "need 1044 (1024-byte header + 10 * 2): the file is truncated");
}

// A file cut short while a trainer reads it (rewritten by a data script,
// say) is a reported error, not a SIGBUS as with a mapped file.
TEST(TokenFile, FileCutShortAfterOpeningIsAnError) {
  TempDirectory tmp;
  const std::string path = tmp.path("shrinking.bin");
  ASSERT_EQ(writeTokenFile(path, std::vector<uint32_t>(100, 7), TokenFormat::Gpt2), std::nullopt);
  std::string error;
  std::optional<TokenFile> file = TokenFile::open(path, error);
  ASSERT_TRUE(file) << error;
  ASSERT_EQ(::truncate(path.c_str(), 1024 + 2 * 50), 0);
  std::vector<uint32_t> out(10);
  EXPECT_EQ(file->read(0, 10, out.data()), std::nullopt); // still there
  EXPECT_EQ(file->read(90, 10, out.data()),
            "cannot read tokens [90, 100) of " + path +
                ": the file is shorter than when it was opened (it changed while training)");
  EXPECT_NE(file->checkVocabulary(256), std::nullopt);
  std::optional<BatchSampler> sampler = BatchSampler::create(*file, {1, 2, 1, 30}, error);
  ASSERT_TRUE(sampler) << error;
  std::optional<MicroBatch> batch;
  for (int step = 0; step < 4 && error.empty(); ++step)
    batch = sampler->sample(step, 0, 0, error);
  EXPECT_NE(error.find("it changed while training"), std::string::npos) << error;
}

TEST(TokenFile, SizeMismatchWithTrailingBytes) {
  TempDirectory tmp;
  const std::string path = tmp.path("long.bin");
  ASSERT_EQ(writeTokenFile(path, std::vector<uint32_t>(10, 42), TokenFormat::Uint32), std::nullopt);
  std::vector<unsigned char> bytes = readBytes(path);
  bytes.push_back(0);
  writeBytes(path, bytes);
  EXPECT_EQ(openError(path), path + ": file size is 1065 bytes, but the header's 10 uint32 tokens "
                                    "need 1064 (1024-byte header + 10 * 4): trailing bytes");
}

TEST(TokenFile, WriterRejectsWhatTheReaderWould) {
  TempDirectory tmp;
  const std::string path = tmp.path("w.bin");
  EXPECT_EQ(writeTokenFile(path, {1, 70000}, TokenFormat::Gpt2),
            path + ": token 70000 at position 1 does not fit GPT-2's uint16 tokens "
                   "(write a LLaMA-3 file)");
  EXPECT_EQ(writeTokenFile(path, {1}, TokenFormat::Gpt2),
            path + ": token count 1, but a token file needs at least 2");
  EXPECT_EQ(writeTokenFile(tmp.path("no/such/dir.bin"), {1, 2}, TokenFormat::Gpt2),
            "cannot create token file " + tmp.path("no/such/dir.bin") +
                ": No such file or directory");
}
