//===- TensorHash.cpp - The hashes a checkpoint records of its tensors ----===//
#include "runtime/checkpoint/TensorHash.h"

#include "stdlib/kernels/init/InitialValuesMath.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace mist::rt {

namespace {

using kernels::math::splitmix64;

constexpr uint64_t hashStart = 0x6d69737463686b70ull; // any fixed start

uint64_t addToHash(uint64_t h, const TensorData &t) {
  h = splitmix64(h ^ fnv1a(t.name));
  const std::byte *p = t.bytes.data();
  size_t n = t.bytes.size(), i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t word;
    std::memcpy(&word, p + i, 8);
    h = splitmix64(h ^ word);
  }
  uint64_t tail = n - i;
  for (; i < n; ++i)
    tail = (tail << 8) | uint64_t(p[i]);
  return splitmix64(h ^ tail);
}

} // namespace

uint64_t tensorHash(const TensorData &t) { return addToHash(hashStart, t); }

uint64_t contentHash(const std::vector<TensorData> &tensors) {
  std::vector<const TensorData *> byName;
  for (const TensorData &t : tensors)
    byName.push_back(&t);
  std::sort(byName.begin(), byName.end(),
            [](const TensorData *a, const TensorData *b) { return a->name < b->name; });
  uint64_t h = hashStart;
  for (const TensorData *tensor : byName)
    h = addToHash(h, *tensor);
  return h;
}

std::string hex(uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", (unsigned long long)v);
  return text;
}

std::string recordedHashProblem(const SafetensorsFile &file, const std::string &path) {
  for (const TensorData &t : file.tensors) {
    auto recorded = file.metadata.find(tensorHashPrefix + t.name);
    if (t.loaded && recorded != file.metadata.end() && recorded->second != hex(tensorHash(t)))
      return path + ": tensor '" + t.name +
             "' does not match the hash recorded when it was written (" + recorded->second +
             "): a damaged or altered file";
  }
  return "";
}

} // namespace mist::rt
