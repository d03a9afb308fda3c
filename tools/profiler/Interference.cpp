//===- Interference.cpp - How concurrent streams slow each other down -----===//
#include "tools/profiler/Interference.h"

#include "format/Streams.h"
#include "tools/profiler/Bf16Gemm.h"
#include "tools/profiler/DeviceBuffer.h"
#include "tools/profiler/EventTimer.h"

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

  // Sets by size, then in stream order: the pairs, the triples, all four.
  std::vector<unsigned> masks;
  for (unsigned mask = 1; mask < 16; ++mask)
    if (std::popcount(mask) >= 2)
      masks.push_back(mask);
  std::stable_sort(masks.begin(), masks.end(),
                   [](unsigned a, unsigned b) { return std::popcount(a) < std::popcount(b); });

  for (unsigned mask : masks) {
    int count[4] = {};
    size_t total = 0;
    for (int s = 0; s < 4; ++s)
      if (mask & (1u << s)) {
        count[s] = static_cast<int>(
            std::clamp(std::ceil(o.targetMs * 1e-3 / r.aloneSeconds[s]), 3.0, 4000.0));
        total += count[s];
      }
    std::vector<std::unique_ptr<Events>> ev(4);
    Events start(1);
    // Hold every stream behind one gate until all the work is queued.
    spinFor(20000 + 5.0 * total, gate.s);
    checkCuda(cudaEventRecord(start.ev[0], gate.s), "cudaEventRecord");
    for (int s = 0; s < 4; ++s) {
      if (!count[s])
        continue;
      ev[s] = std::make_unique<Events>(count[s] + 1);
      checkCuda(cudaStreamWaitEvent(streams[s].s, start.ev[0], 0), "cudaStreamWaitEvent");
      checkCuda(cudaEventRecord(ev[s]->ev[0], streams[s].s), "cudaEventRecord");
    }
    // Interleave the launches so no stream's queue runs far ahead.
    for (int i = 0; i < *std::max_element(count, count + 4); ++i)
      for (int s = 0; s < 4; ++s)
        if (i < count[s]) {
          unit[s]();
          checkCuda(cudaEventRecord(ev[s]->ev[i + 1], streams[s].s), "cudaEventRecord");
        }
    checkCuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");

    double lo = 0, hi = INFINITY;
    for (int s = 0; s < 4; ++s)
      if (count[s]) {
        lo = std::max(lo, since(start.ev[0], ev[s]->ev[0]));
        hi = std::min(hi, since(start.ev[0], ev[s]->ev[count[s]]));
      }
    InterferenceEntry f;
    for (int s = 0; s < 4; ++s) {
      if (!count[s])
        continue;
      double sum = 0;
      int inside = 0;
      for (int i = 0; i < count[s]; ++i) {
        double a = since(start.ev[0], ev[s]->ev[i]), b = since(start.ev[0], ev[s]->ev[i + 1]);
        if (a >= lo && b <= hi) {
          sum += b - a;
          ++inside;
        }
      }
      double busy =
          inside ? sum / inside
                 : (since(start.ev[0], ev[s]->ev[count[s]]) - since(start.ev[0], ev[s]->ev[0])) /
                       count[s];
      double factor = std::max(1.0, busy / r.aloneSeconds[s]);
      f.streams.push_back(mist::Stream(s));
      f.factors.push_back(std::round(factor * 1000) / 1000);
    }
    r.table.push_back(std::move(f));
  }
  auto ms = [](double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g ms", s * 1e3);
    return std::string(buf);
  };
  r.how = "streams run together for about " + std::to_string(static_cast<int>(o.targetMs)) +
          " ms per set; units alone: compute bf16 GEMM " + gemm.shape() + " " +
          ms(r.aloneSeconds[0]) + ", g2g device copy (stand-in for NCCL) " + ms(r.aloneSeconds[1]) +
          ", h2d " + ms(r.aloneSeconds[2]) + ", d2h " + ms(r.aloneSeconds[3]) + " (" +
          std::to_string(o.copyBytes >> 20) + " MiB copies)";
  return r;
}

} // namespace mist::profiler
