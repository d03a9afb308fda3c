//===- Interference.cpp - How concurrent streams slow each other down -----===//
#include "tools/profiler/Interference.h"

#include "format/Streams.h"
#include "tools/profiler/Bf16Gemm.h"
#include "tools/profiler/DeviceBuffer.h"
#include "tools/profiler/EventTimer.h"
#include "tools/profiler/InterferenceFactors.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>

namespace mist::profiler {

namespace {

/// A CUDA stream that does not synchronize with the legacy default stream.
struct Stream {
  cudaStream_t s = nullptr;
  Stream() { checkCuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"); }
  ~Stream() { cudaStreamDestroy(s); }
};

/// `n` events, destroyed with the object.
struct Events {
  std::vector<cudaEvent_t> ev;
  explicit Events(size_t n) : ev(n, nullptr) {
    for (cudaEvent_t &e : ev)
      checkCuda(cudaEventCreate(&e), "cudaEventCreate");
  }
  ~Events() {
    for (cudaEvent_t e : ev)
      cudaEventDestroy(e);
  }
};

double since(cudaEvent_t ref, cudaEvent_t e) {
  float ms = 0;
  checkCuda(cudaEventElapsedTime(&ms, ref, e), "cudaEventElapsedTime");
  return ms * 1e-3;
}

/// One set's run: how many units each stream repeats (0: not in the set),
/// the gate's event, and per stream an event before and after every unit.
struct SetRun {
  int count[4] = {};
  size_t total = 0;
  std::vector<std::unique_ptr<Events>> ev = std::vector<std::unique_ptr<Events>>(4);
  Events start{1};
};

/// Each stream of the set repeats its unit for about `targetMs` (3 to 4000
/// units).
void countUnits(unsigned mask, double targetMs, const double alone[4], SetRun &run) {
  for (int s = 0; s < 4; ++s)
    if (mask & (1u << s)) {
      run.count[s] =
          static_cast<int>(std::clamp(std::ceil(targetMs * 1e-3 / alone[s]), 3.0, 4000.0));
      run.total += run.count[s];
    }
}

/// Queues every stream's units behind one gate, so they start together,
/// and waits for all of them.
void runTogether(SetRun &run, Stream (&streams)[4], Stream &gate,
                 const std::function<void()> (&unit)[4]) {
  // Hold every stream behind one gate until all the work is queued.
  spinFor(20000 + 5.0 * run.total, gate.s);
  checkCuda(cudaEventRecord(run.start.ev[0], gate.s), "cudaEventRecord");
  for (int s = 0; s < 4; ++s) {
    if (!run.count[s])
      continue;
    run.ev[s] = std::make_unique<Events>(run.count[s] + 1);
    checkCuda(cudaStreamWaitEvent(streams[s].s, run.start.ev[0], 0), "cudaStreamWaitEvent");
    checkCuda(cudaEventRecord(run.ev[s]->ev[0], streams[s].s), "cudaEventRecord");
  }
  // Interleave the launches so no stream's queue runs far ahead.
  for (int i = 0; i < *std::max_element(run.count, run.count + 4); ++i)
    for (int s = 0; s < 4; ++s)
      if (i < run.count[s]) {
        unit[s]();
        checkCuda(cudaEventRecord(run.ev[s]->ev[i + 1], streams[s].s), "cudaEventRecord");
      }
  checkCuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

/// The set's units as times from its gate, for interferenceFactors.
InterferenceEntry factorsOf(const SetRun &run, const double alone[4]) {
  const cudaEvent_t start = run.start.ev[0];
  UnitTimes units[4];
  for (int s = 0; s < 4; ++s)
    for (int i = 0; i < run.count[s]; ++i)
      units[s].push_back({since(start, run.ev[s]->ev[i]), since(start, run.ev[s]->ev[i + 1])});
  return interferenceFactors(units, alone);
}

/// The line for the file's header: how long the sets ran and each unit alone.
std::string describe(const InterferenceOptions &o, const Bf16Gemm &gemm, const double alone[4]) {
  auto ms = [](double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g ms", s * 1e3);
    return std::string(buf);
  };
  return "streams run together for about " + std::to_string(static_cast<int>(o.targetMs)) +
         " ms per set; units alone: compute bf16 GEMM " + gemm.shape() + " " + ms(alone[0]) +
         ", g2g device copy (stand-in for NCCL) " + ms(alone[1]) + ", h2d " + ms(alone[2]) +
         ", d2h " + ms(alone[3]) + " (" + std::to_string(o.copyBytes >> 20) + " MiB copies)";
}

} // namespace

InterferenceResult measureInterference(const InterferenceOptions &o) {
  Stream streams[4], gate;
  Bf16Gemm gemm(o.gemmSize, o.gemmSize, o.gemmSize, streams[0].s);
  DeviceBuffer<char> g2gSrc(o.copyBytes), g2gDst(o.copyBytes), h2dDst(o.copyBytes),
      d2hSrc(o.copyBytes);
  PinnedBuffer h2dSrc(o.copyBytes), d2hDst(o.copyBytes);
  const std::function<void()> unit[4] = {
      [&] { gemm.launch(); },
      [&] {
        checkCuda(cudaMemcpyAsync(g2gDst.get(), g2gSrc.get(), o.copyBytes, cudaMemcpyDeviceToDevice,
                                  streams[1].s),
                  "cudaMemcpyAsync (g2g)");
      },
      [&] {
        checkCuda(cudaMemcpyAsync(h2dDst.get(), h2dSrc.get(), o.copyBytes, cudaMemcpyHostToDevice,
                                  streams[2].s),
                  "cudaMemcpyAsync (h2d)");
      },
      [&] {
        checkCuda(cudaMemcpyAsync(d2hDst.get(), d2hSrc.get(), o.copyBytes, cudaMemcpyDeviceToHost,
                                  streams[3].s),
                  "cudaMemcpyAsync (d2h)");
      }};

  InterferenceResult r;
  for (int s = 0; s < 4; ++s)
    r.aloneSeconds[s] = medianSeconds(streams[s].s, o.warmup, o.repeats, unit[s]);
  for (unsigned mask : interferenceStreamSets()) {
    SetRun run;
    countUnits(mask, o.targetMs, r.aloneSeconds, run);
    runTogether(run, streams, gate, unit);
    r.table.push_back(factorsOf(run, r.aloneSeconds));
  }
  r.how = describe(o, gemm, r.aloneSeconds);
  return r;
}

} // namespace mist::profiler
