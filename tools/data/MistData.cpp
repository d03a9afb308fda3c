//===- MistData.cpp - mist-data: what a trainer will read -----------------===//
/// \file
/// Looks into training data as the trainer reads it (docs/data.md):
///
///   mist-data info PREFIX...       each Megatron-LM dataset's sequences,
///                                  documents, tokens and token type
///   mist-data samples --data-path [W1] PREFIX1 [W2 PREFIX2 ...] --seq-len T
///                     --samples N [--split A,B,C] [--seed S] [--first K]
///                     [--count C] [--vocab V]
///                                  training samples K .. K + C - 1 (all by
///                                  default) of a run asking for N samples,
///                                  one JSON line each: the T + 1 tokens
///                                  the trainer splits into inputs and targets;
///                                  --vocab V refuses a token at or past V,
///                                  as a trainer of a model of vocabulary V
///
/// A trainer run of `--steps S` with a global batch of B asks for S * B
/// samples and reads sample s * B + k as sequence k of step s.
//===----------------------------------------------------------------------===//
#include "runtime/data/IndexedDataset.h"
#include "runtime/data/MegatronData.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace mist::rt;

namespace {

[[noreturn]] void usage(const std::string &why) {
  if (!why.empty())
    std::fprintf(stderr, "mist-data: error: %s\n", why.c_str());
  std::fputs("usage: mist-data info PREFIX...\n"
             "       mist-data samples --data-path [W1] PREFIX1 [W2 PREFIX2 ...] --seq-len T "
             "--samples N [--split A,B,C] [--seed S] [--first K] [--count C] [--vocab V]\n",
             why.empty() ? stdout : stderr);
  std::exit(why.empty() ? 0 : 2);
}

int64_t count(const std::string &flag, const char *text, int64_t low, int64_t high) {
  char *end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (!*text || *end || v < low || v > high)
    usage(flag + " takes an integer from " + std::to_string(low) + " to " + std::to_string(high) +
          ", not '" + text + "'");
  return v;
}

int info(int argc, char **argv) {
  if (argc < 3)
    usage("info needs a dataset prefix");
  int failed = 0;
  for (int i = 2; i < argc; ++i) {
    std::string error;
    std::optional<IndexedDataset> d = IndexedDataset::open(argv[i], error);
    if (!d) {
      std::fprintf(stderr, "mist-data: error: %s\n", error.c_str());
      failed = 1;
      continue;
    }
    std::printf("%s: %lld sequences in %lld documents, %lld tokens of %s\n", d->prefix().c_str(),
                (long long)d->sequenceCount(), (long long)d->documentCount(),
                (long long)d->tokenCount(), d->dtypeName());
  }
  return failed;
}

int samples(int argc, char **argv) {
  MegatronDataRequest r;
  int64_t first = 0, wanted = -1;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char * {
      if (i + 1 >= argc)
        usage("missing value for " + a);
      return argv[++i];
    };
    if (a == "--data-path") {
      while (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0)
        r.dataPath += (r.dataPath.empty() ? "" : " ") + std::string(argv[++i]);
    } else if (a == "--split")
      r.split = value();
    else if (a == "--seq-len")
      r.seqLen = int(count(a, value(), 2, 1 << 30));
    else if (a == "--samples")
      r.samples = count(a, value(), 1, int64_t(1) << 40);
    else if (a == "--seed")
      r.seed = uint32_t(count(a, value(), 0, UINT32_MAX));
    else if (a == "--first")
      first = count(a, value(), 0, int64_t(1) << 40);
    else if (a == "--count")
      wanted = count(a, value(), 0, int64_t(1) << 40);
    else if (a == "--vocab")
      r.vocabulary = uint64_t(count(a, value(), 1, UINT32_MAX));
    else if (a == "--help" || a == "-h")
      usage("");
    else
      usage("unknown flag " + a);
  }
  if (r.dataPath.empty() || r.samples < 1 || r.seqLen < 2)
    usage("samples needs --data-path, --seq-len and --samples");
  std::string error;
  std::optional<MegatronData> data = MegatronData::open(r, error);
  if (!data) {
    std::fprintf(stderr, "mist-data: error: %s\n", error.c_str());
    return 1;
  }
  std::fprintf(stderr, "mist-data: %s\n", data->summary().c_str());
  const int64_t end = wanted < 0 ? data->size() : std::min(data->size(), first + wanted);
  std::vector<uint32_t> tokens(size_t(r.seqLen) + 1);
  for (int64_t j = first; j < end; ++j) {
    if (auto bad = data->read(j, tokens.data())) {
      std::fprintf(stderr, "mist-data: error: %s\n", bad->c_str());
      return 1;
    }
    std::printf("{\"sample\": %lld, \"tokens\": [", (long long)j);
    for (size_t t = 0; t < tokens.size(); ++t)
      std::printf(t ? ", %u" : "%u", tokens[t]);
    std::printf("]}\n");
  }
  return std::fflush(stdout) == 0 && !std::ferror(stdout) ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2)
    usage("give a command: info or samples");
  const std::string command = argv[1];
  if (command == "info")
    return info(argc, argv);
  if (command == "samples")
    return samples(argc, argv);
  if (command == "--help" || command == "-h")
    usage("");
  usage("unknown command " + command);
}
