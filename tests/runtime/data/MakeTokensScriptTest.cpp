//===- MakeTokensScriptTest.cpp - scripts/make-tokens.py meets TokenFile --===//
/// The script writes what TokenFile reads: one version 1 token per byte of
/// the files, in sorted path order, symbolic links skipped.
//===----------------------------------------------------------------------===//
#include "runtime/data/IndexedDataset.h"
#include "runtime/data/TokenFile.h"
#include "tests/runtime/data/TempDirectory.h"

#include <cstdlib>
#include <filesystem>
#include <gtest/gtest.h>

using namespace mist::rt;
using mist::rt::testing::TempDirectory;
using mist::rt::testing::writeBytes;

TEST(MakeTokensScript, WritesWhatTokenFileReads) {
  if (std::string(MIST_PYTHON).empty())
    GTEST_SKIP() << "no Python 3 interpreter was found at configure time";
  TempDirectory tmp;
  std::filesystem::create_directories(tmp.path("texts/sub"));
  writeBytes(tmp.path("texts/b.txt"), {'B', '\n'});
  writeBytes(tmp.path("texts/a.txt"), {'a', 0xFF, 0x00});
  writeBytes(tmp.path("texts/sub/c.txt"), {'c'});
  std::filesystem::create_symlink(tmp.path("texts/a.txt"), tmp.path("texts/link.txt"));
  const std::string out = tmp.path("tokens.bin");
  const std::string command = std::string(MIST_PYTHON) + " " + MIST_MAKE_TOKENS_SCRIPT + " --out " +
                              out + " " + tmp.path("texts") + " > " + tmp.path("log.txt");
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  std::string error;
  std::optional<TokenFile> file = TokenFile::open(out, error);
  ASSERT_TRUE(file) << error;
  EXPECT_EQ(file->format(), TokenFormat::Gpt2);
  EXPECT_EQ(file->vocabulary(), 256); // recorded in header[3]
  const std::vector<uint32_t> expected = {'a', 0xFF, 0x00, 'B', '\n', 'c'};
  ASSERT_EQ(file->size(), int64_t(expected.size()));
  std::vector<uint32_t> all(expected.size());
  EXPECT_EQ(file->read(0, file->size(), all.data()), std::nullopt);
  EXPECT_EQ(all, expected);
}

// --format megatron: one sequence per file, read back by the trainer's reader.
TEST(MakeTokensScript, WritesMegatronDatasets) {
  if (std::string(MIST_PYTHON).empty())
    GTEST_SKIP() << "no Python 3 interpreter was found at configure time";
  TempDirectory tmp;
  std::filesystem::create_directories(tmp.path("texts"));
  writeBytes(tmp.path("texts/b.txt"), {'B', '\n'});
  writeBytes(tmp.path("texts/a.txt"), {'a', 0xFF, 0x00});
  writeBytes(tmp.path("texts/empty.txt"), {});
  const std::string command = std::string(MIST_PYTHON) + " " + MIST_MAKE_TOKENS_SCRIPT +
                              " --format megatron --out " + tmp.path("corpus") + " " +
                              tmp.path("texts") + " > " + tmp.path("log.txt");
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::string error;
  std::optional<IndexedDataset> d = IndexedDataset::open(tmp.path("corpus"), error);
  ASSERT_TRUE(d) << error;
  EXPECT_EQ(d->sequenceCount(), 2); // the empty file holds no sequence
  EXPECT_EQ(d->documentCount(), 2);
  EXPECT_STREQ(d->dtypeName(), "uint16");
  std::vector<uint32_t> a(3), b(2);
  ASSERT_EQ(d->read(0, 0, 3, a.data(), 256), std::nullopt);
  ASSERT_EQ(d->read(1, 0, 2, b.data(), 256), std::nullopt);
  EXPECT_EQ(a, (std::vector<uint32_t>{'a', 0xFF, 0x00}));
  EXPECT_EQ(b, (std::vector<uint32_t>{'B', '\n'}));
}
