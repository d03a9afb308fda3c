//===- TokenFileTool.cpp - Open and check a token file as the trainer does ===//
/// \file
/// mist-token-tool, for the adversarial corpus (tests/corpus) and for
/// looking at a data set before training on it:
///
///   mist-token-tool check FILE VOCAB   open FILE, read its first tokens and
///                                      check every token is below VOCAB
///
/// Prints `FILE: N tokens (FORMAT)` and exits 0, or `error: ...` naming the
/// file and exits 1 (2 for a usage error).
//===----------------------------------------------------------------------===//
#include "runtime/data/TokenFile.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace mist::rt;

namespace {

int check(const std::string &path, uint32_t vocabulary) {
  std::string error;
  std::optional<TokenFile> file = TokenFile::open(path, error);
  if (!file) {
    std::fprintf(stderr, "error: %s\n", error.c_str());
    return 1;
  }
  std::vector<uint32_t> first(static_cast<size_t>(std::min<int64_t>(file->size(), 16)));
  if (auto failed = file->read(0, static_cast<int64_t>(first.size()), first.data())) {
    std::fprintf(stderr, "error: %s\n", failed->c_str());
    return 1;
  }
  if (auto outside = file->checkVocabulary(vocabulary)) {
    std::fprintf(stderr, "error: %s\n", outside->c_str());
    return 1;
  }
  std::printf("%s: %lld tokens (%s)\n", path.c_str(), static_cast<long long>(file->size()),
              tokenFormatInfo(file->format()).name);
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc == 4 && std::string(argv[1]) == "check") {
    char *end = nullptr;
    errno = 0;
    const unsigned long long vocabulary = std::strtoull(argv[3], &end, 10);
    if (errno == 0 && end != argv[3] && *end == '\0' && vocabulary >= 1 &&
        vocabulary <= 0xFFFFFFFFull)
      return check(argv[2], static_cast<uint32_t>(vocabulary));
    std::fprintf(stderr, "error: VOCAB must be a whole number from 1 to 2^32-1, got '%s'\n",
                 argv[3]);
    return 2;
  }
  std::fprintf(stderr, "usage: %s check FILE VOCAB\n", argv[0]);
  return 2;
}
