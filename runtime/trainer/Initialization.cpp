//===- Initialization.cpp - The canonical layout and initial values -------===//
/// \file
/// Every plan starts from the same model: a parameter's elements are drawn
/// by their index in the full tensor, and a tp rank's shard maps its local
/// elements to full indices (fullIndexOf), so any split of the tensor over
/// ranks holds the same values.
//===----------------------------------------------------------------------===//
#include "runtime/trainer/Trainer.h"

#include "runtime/trainer/Hash.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unistd.h>

namespace mist::rt {

namespace {

bool endsWith(const std::string &s, const char *suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

} // namespace

namespace {

/// The tp shard part of InitialValuesArgs: how rank `rank` of `tp` holds `p`.
void describeShard(kernels::InitialValuesArgs &a, const ParamSpec &p, int rank, int tp) {
  a.tp = tp;
  a.rank = rank;
  a.groupCount = 0; // the identity
  if (p.shardAxis < 0 || tp == 1)
    return;
  a.inner = 1;
  for (size_t d = p.shardAxis + 1; d < p.shape.size(); ++d)
    a.inner *= p.shape[d];
  a.fullAxis = p.shape[p.shardAxis];
  if (p.groups.empty()) { // the axis is one part
    a.groupCount = 1;
    a.group[0] = a.fullAxis;
    return;
  }
  if (p.groups.size() > size_t(kernels::initialValuesMaxGroups))
    abortJob(std::string("parameter ") + p.name + ": its split axis has " +
             std::to_string(p.groups.size()) + " parts, the runtime takes at most " +
             std::to_string(kernels::initialValuesMaxGroups));
  a.groupCount = int(p.groups.size());
  std::copy(p.groups.begin(), p.groups.end(), a.group);
}

} // namespace

kernels::InitialValuesArgs initialValuesArgs(const ParamSpec &p, int rank, int tp, int layer,
                                             uint64_t seed, float *out, size_t n) {
  kernels::InitialValuesArgs a{};
  a.out = out;
  a.n = kernels::Index(n);
  const InitialStream stream = initialStream(p.name, layer, seed);
  a.constant = stream.constant;
  a.value = stream.value;
  a.key = stream.key;
  describeShard(a, p, rank, tp);
  return a;
}

kernels::InitialValuesArgs shardMap(const ParamSpec &p, int rank, int tp) {
  kernels::InitialValuesArgs a{};
  describeShard(a, p, rank, tp);
  return a;
}

int64_t fullIndexOf(const ParamSpec &p, int rank, int tp, int64_t local) {
  return kernels::math::fullIndex(shardMap(p, rank, tp), local);
}

InitialStream initialStream(const std::string &name, int layer, uint64_t seed) {
  if (endsWith(name, ".bias"))
    return {true, 0.f, 0};
  if (name.find("norm") != std::string::npos || name.find(".ln") != std::string::npos)
    return {true, 1.f, 0};
  return {false, 0.f, splitmix64(seed ^ fnv1a(name) ^ splitmix64(uint64_t(layer) + 1))};
}

float initialValue(const InitialStream &stream, int64_t index) {
  return kernels::math::initialValue(stream.constant, stream.value, stream.key, index);
}

float initialValue(const std::string &name, int layer, int64_t index, uint64_t seed) {
  return initialValue(initialStream(name, layer, seed), index);
}

int initialValueThreads(int ranksOnHost) {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return int(std::max(1L, cores / std::max(1, ranksOnHost)));
}

} // namespace mist::rt
