//===- MakeTokensScriptTest.cpp - scripts/make-tokens.py meets TokenFile --===//
/// The script writes what TokenFile reads: one version 1 token per byte of
/// the files, in sorted path order, symbolic links skipped.
//===----------------------------------------------------------------------===//
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
  const std::vector<uint32_t> expected = {'a', 0xFF, 0x00, 'B', '\n', 'c'};
  ASSERT_EQ(file->size(), int64_t(expected.size()));
  std::vector<uint32_t> all(expected.size());
  EXPECT_EQ(file->read(0, file->size(), all.data()), std::nullopt);
  EXPECT_EQ(all, expected);
}
