//===- TempDirectory.h - A fresh directory per test -----------------------===//
/// \file
/// A unique directory under the test temporary folder, removed (with all it
/// holds) when the test ends, so tests can run in parallel and leave nothing.
//===----------------------------------------------------------------------===//
#pragma once

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>
#include <stdexcept>
#include <stdlib.h>
#include <string>
#include <vector>

namespace mist::rt::testing {

class TempDirectory {
public:
  TempDirectory() {
    std::string pattern = ::testing::TempDir() + "mistrt-XXXXXX";
    if (!::mkdtemp(pattern.data()))
      throw std::runtime_error("cannot create a temporary directory from " + pattern);
    root = pattern;
  }
  ~TempDirectory() {
    std::error_code ignored;
    std::filesystem::permissions(root, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ignored);
    std::filesystem::remove_all(root, ignored);
  }
  std::string path(const std::string &name) const { return (root / name).string(); }
  const std::filesystem::path &dir() const { return root; }

private:
  std::filesystem::path root;
};

inline std::vector<unsigned char> readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void writeBytes(const std::string &path, const std::vector<unsigned char> &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
}

} // namespace mist::rt::testing
