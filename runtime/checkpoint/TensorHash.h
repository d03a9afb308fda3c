//===- TensorHash.h - The hashes a checkpoint records of its tensors ------===//
/// \file
/// A checkpoint records, in its metadata, a hash of each tensor's name and
/// bytes (`hash:<name>`) and of all of them together, so that whoever reads
/// it (the trainer's resume, `mistc --emit=hf`) finds a damaged or altered
/// file before using it.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/checkpoint/Safetensors.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mist::rt {

/// FNV-1a of a name.
inline uint64_t fnv1a(const std::string &s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s)
    h = (h ^ c) * 0x100000001b3ull;
  return h;
}

/// The metadata key of a tensor's recorded hash is this prefix and its name.
constexpr const char *tensorHashPrefix = "hash:";

/// One tensor's hash (its name and bytes).
uint64_t tensorHash(const TensorData &t);
/// All tensors' hash, in name order (the order a file is read back in).
uint64_t contentHash(const std::vector<TensorData> &tensors);
/// 16 lower-case hex digits.
std::string hex(uint64_t v);

/// The first loaded tensor of `file` whose bytes do not match the hash its
/// metadata records, as a message naming `path`; "" when all match (a
/// tensor without a recorded hash, as in older checkpoints, passes).
std::string recordedHashProblem(const SafetensorsFile &file, const std::string &path);

} // namespace mist::rt
