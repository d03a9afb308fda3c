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
#include <pthread.h>
#include <sched.h>
#include <thread>
#include <unistd.h>

namespace mist::rt {

namespace {

bool endsWith(const std::string &s, const char *suffix) {
  size_t n = std::strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

} // namespace

int64_t fullIndexOf(const ParamSpec &p, int rank, int tp, int64_t local) {
  if (p.shardAxis < 0 || tp == 1)
    return local;
  int64_t inner = 1;
  for (size_t d = p.shardAxis + 1; d < p.shape.size(); ++d)
    inner *= p.shape[d];
  const int64_t fullAxis = p.shape[p.shardAxis];
  const int64_t localAxis = fullAxis / tp;
  const int64_t innerIdx = local % inner, axisIdx = (local / inner) % localAxis,
                outer = local / (inner * localAxis);
  // Walk the groups: each contributes size/tp consecutive local entries.
  int64_t offset = 0, seen = 0, fullAxisIdx = 0;
  for (int64_t g : p.groups) {
    int64_t part = g / tp;
    if (axisIdx < seen + part) {
      fullAxisIdx = offset + rank * part + (axisIdx - seen);
      break;
    }
    seen += part;
    offset += g;
  }
  return (outer * fullAxis + fullAxisIdx) * inner + innerIdx;
}

InitialStream initialStream(const std::string &name, int layer, uint64_t seed) {
  if (endsWith(name, ".bias"))
    return {true, 0.f, 0};
  if (name.find("norm") != std::string::npos || name.find(".ln") != std::string::npos)
    return {true, 1.f, 0};
  return {false, 0.f, splitmix64(seed ^ fnv1a(name) ^ splitmix64(uint64_t(layer) + 1))};
}

float initialValue(const InitialStream &stream, int64_t index) {
  if (stream.constant)
    return stream.value;
  uint64_t key = stream.key ^ uint64_t(index);
  uint64_t a = splitmix64(key), b = splitmix64(key ^ 0x5bd1e995ull);
  double u1 = (double(a >> 11) + 0.5) / 9007199254740992.0,
         u2 = double(b >> 11) / 9007199254740992.0;
  return float(0.02 * std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

float initialValue(const std::string &name, int layer, int64_t index, uint64_t seed) {
  return initialValue(initialStream(name, layer, seed), index);
}

int initialValueThreads(int ranksOnHost) {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return int(std::max(1L, cores / std::max(1, ranksOnHost)));
}

namespace {

/// Lets the calling thread run on any online core: the rank's own binding
/// is for its training loop. Where the job may not use them all (a cgroup
/// cpuset), the call fails and the thread keeps the rank's cores.
void mayUseEveryCore() {
  cpu_set_t all;
  CPU_ZERO(&all);
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  for (long c = 0; c < cores && c < CPU_SETSIZE; ++c)
    CPU_SET(int(c), &all);
  pthread_setaffinity_np(pthread_self(), sizeof all, &all);
}

} // namespace

void fillInitialValues(std::vector<float> &values, const ParamSpec &p, int tpRank, int tp,
                       int layer, uint64_t seed, int threadsAllowed) {
  const InitialStream stream = initialStream(p.name, layer, seed);
  auto fill = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i)
      values[i] = initialValue(stream, fullIndexOf(p, tpRank, tp, int64_t(i)));
  };
  // Each element depends on its index alone, so threads change nothing but
  // the time.
  constexpr size_t kPerThreadMin = size_t(1) << 20;
  const size_t threads =
      std::min<size_t>(size_t(std::max(1, threadsAllowed)), values.size() / kPerThreadMin + 1);
  if (threads == 1)
    return fill(0, values.size());
  std::vector<std::thread> workers;
  const size_t per = (values.size() + threads - 1) / threads;
  for (size_t t = 0; t < threads; ++t)
    workers.emplace_back(
        [&fill](size_t begin, size_t end) {
          mayUseEveryCore();
          fill(begin, end);
        },
        std::min(values.size(), t * per), std::min(values.size(), (t + 1) * per));
  for (std::thread &w : workers)
    w.join();
}

} // namespace mist::rt
