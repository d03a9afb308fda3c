//===- AtomicFileTest.cpp - Temporary files of interrupted saves ----------===//
#include "runtime/checkpoint/AtomicFile.h"
#include "tests/runtime/data/TempDirectory.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

using namespace mist::rt;
using mist::rt::testing::TempDirectory;

namespace {

void touch(const std::string &path) { std::ofstream(path) << "partial"; }

} // namespace

// A save killed before its commit leaves `<path>.tmp.<pid>`; only such
// files, for this path, are removed.
TEST(AtomicFile, RemoveInterruptedWritesTakesOnlyThisPathsTemporaries) {
  TempDirectory tmp;
  const std::string target = tmp.path("latest.safetensors");
  for (const char *name :
       {"latest.safetensors", "latest.safetensors.tmp.4242", "latest.safetensors.tmp.17",
        "latest.safetensors.tmp.mine", "latest.safetensors.tmp.", "other.safetensors.tmp.99"})
    touch(tmp.path(name));
  std::string error;
  std::vector<std::string> removed = removeInterruptedWrites(target, error);
  EXPECT_EQ(error, "");
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed, (std::vector<std::string>{tmp.path("latest.safetensors.tmp.17"),
                                               tmp.path("latest.safetensors.tmp.4242")}));
  for (const char *kept : {"latest.safetensors", "latest.safetensors.tmp.mine",
                           "latest.safetensors.tmp.", "other.safetensors.tmp.99"})
    EXPECT_TRUE(std::filesystem::exists(tmp.path(kept))) << kept;
  EXPECT_TRUE(removeInterruptedWrites(target, error).empty());
}

TEST(AtomicFile, RemoveInterruptedWritesNamesAMissingFolder) {
  std::string error;
  EXPECT_TRUE(
      removeInterruptedWrites("/nonexistent-mist-folder/latest.safetensors", error).empty());
  EXPECT_NE(error.find("cannot list /nonexistent-mist-folder"), std::string::npos) << error;
}
