//===- EventTimer.cpp - Median GPU time of a launch -----------------------===//
#include "tools/profiler/EventTimer.h"

#include "tools/profiler/DeviceBuffer.h"

#include <algorithm>

namespace mist::profiler {

namespace {
/// Two events, destroyed with the object.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    checkCuda(cudaEventCreate(&start), "cudaEventCreate");
    checkCuda(cudaEventCreate(&stop), "cudaEventCreate");
  }
  ~EventPair() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
};
} // namespace

double medianSeconds(cudaStream_t stream, int warmup, int repeats,
                     const std::function<void()> &launch) {
  EventPair ev;
  for (int i = 0; i < warmup; ++i)
    launch();
  checkCuda(cudaStreamSynchronize(stream), "warm-up");
  std::vector<double> times;
  for (int i = 0; i < std::max(repeats, 1); ++i) {
    checkCuda(cudaEventRecord(ev.start, stream), "cudaEventRecord");
    launch();
    checkCuda(cudaEventRecord(ev.stop, stream), "cudaEventRecord");
    checkCuda(cudaEventSynchronize(ev.stop), "cudaEventSynchronize");
    float ms = 0;
    checkCuda(cudaEventElapsedTime(&ms, ev.start, ev.stop), "cudaEventElapsedTime");
    times.push_back(ms * 1e-3);
  }
  return median(times);
}

} // namespace mist::profiler
