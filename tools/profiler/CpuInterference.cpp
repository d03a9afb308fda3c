//===- CpuInterference.cpp - Stream interference on a CPU rank ------------===//
#include "tools/profiler/CpuInterference.h"

#include "format/Streams.h"
#include "runtime/ops/Ops.h"
#include "tools/profiler/CpuOpTimer.h"
#include "tools/profiler/InterferenceFactors.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <latch>
#include <string>
#include <thread>
#include <vector>

namespace mist::profiler {

namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Every stream of `mask` repeats its unit `count[s]` times on a thread of
/// its own, all released together; returns each unit's begin and end.
void runTogether(unsigned mask, const int count[4], const std::function<void()> (&unit)[4],
                 UnitTimes (&times)[4]) {
  const int threads = std::popcount(mask);
  std::latch ready(threads + 1);
  std::chrono::steady_clock::time_point start;
  std::vector<std::thread> workers;
  for (int s = 0; s < 4; ++s)
    if (mask & (1u << s))
      workers.emplace_back([&, s] {
        ready.arrive_and_wait(); // the start is set before the last arrival
        for (int i = 0; i < count[s]; ++i) {
          const double a = secondsSince(start);
          unit[s]();
          times[s].push_back({a, secondsSince(start)});
        }
      });
  start = std::chrono::steady_clock::now();
  ready.arrive_and_wait();
  for (std::thread &w : workers)
    w.join();
}

} // namespace

InterferenceResult measureCpuInterference(const CpuInterferenceOptions &o) {
  const int64_t n = o.gemmSize;
  std::vector<float> x(size_t(n * n), 0.5f), w(size_t(n * n), 0.25f), y(size_t(n * n));
  const size_t floats = o.copyBytes / sizeof(float);
  std::vector<std::vector<float>> from(3, std::vector<float>(floats, 1.f)),
      to(3, std::vector<float>(floats));
  std::function<void()> unit[4];
  unit[int(mist::Stream::Compute)] = [&] {
    mist::rt::ops::linear(y.data(), x.data(), w.data(), nullptr, n, n, n);
  };
  for (int s = 1; s < 4; ++s) // g2g, h2d, d2h: each its own buffers
    unit[s] = [&, s] { std::memcpy(to[s - 1].data(), from[s - 1].data(), o.copyBytes); };
  InterferenceResult r;
  const auto sync = [&] {
    if (o.together)
      o.together();
  };
  for (int s = 0; s < 4; ++s) {
    sync();
    r.aloneSeconds[s] = medianHostSeconds(o.warmup, o.repeats, unit[s]);
  }
  for (unsigned mask : interferenceStreamSets()) {
    int count[4] = {};
    for (int s = 0; s < 4; ++s)
      if (mask & (1u << s))
        count[s] = int(std::clamp(std::ceil(o.targetMs * 1e-3 / r.aloneSeconds[s]), 3.0, 4000.0));
    UnitTimes times[4];
    sync();
    runTogether(mask, count, unit, times);
    r.table.push_back(interferenceFactors(times, r.aloneSeconds));
  }
  char line[320];
  std::snprintf(line, sizeof line,
                "the streams on threads of a CPU rank as --overlap runs them, each set for about "
                "%.0f ms: compute an fp32 %lldx%lldx%lld GEMM (ops::linear, %.3f ms alone), "
                "g2g, h2d and d2h %zu MiB copies within host memory (%.3f ms alone)",
                o.targetMs, (long long)n, (long long)n, (long long)n, r.aloneSeconds[0] * 1e3,
                o.copyBytes >> 20, r.aloneSeconds[1] * 1e3);
  r.how = line;
  return r;
}

InterferenceResult streamsInTurn() {
  InterferenceResult r;
  for (unsigned mask : interferenceStreamSets()) {
    mist::InterferenceEntry e;
    const double k = std::popcount(mask);
    for (int s = 0; s < 4; ++s)
      if (mask & (1u << s)) {
        e.streams.push_back(mist::Stream(s));
        e.factors.push_back(k);
      }
    r.table.push_back(e);
  }
  r.how = "not timed: without --overlap a CPU rank runs its streams' work in turn on one "
          "thread, so each of k busy streams runs at 1/k of its speed (factor k)";
  return r;
}

} // namespace mist::profiler
