//===- EventTimer.h - Median GPU time of a launch -------------------------===//
/// \file
/// Times work queued on a stream with CUDA events: `warmup` unmeasured runs
/// (cuBLASLt picks its algorithm, caches warm up), then `repeats` runs each
/// between two events, synchronized one at a time so runs never overlap;
/// the median of those is the figure (robust to a stray slow run).
//===----------------------------------------------------------------------===//
#pragma once

#include "tools/profiler/Median.h"

#include <cuda_runtime_api.h>
#include <functional>
#include <vector>

namespace mist::profiler {

/// The median seconds of `launch()` (which queues work on `stream`).
double medianSeconds(cudaStream_t stream, int warmup, int repeats,
                     const std::function<void()> &launch);

} // namespace mist::profiler
