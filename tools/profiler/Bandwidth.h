//===- Bandwidth.h - Device memory and host link bandwidth ----------------===//
/// \file
/// The roofline's memory figure and the host links, each the median of
/// repeated copies timed with CUDA events:
///  - device memory: a device-to-device cudaMemcpyAsync of `bytes`, counted
///    as read + write (2 x bytes per copy), which is how the cost model
///    counts an op's bytes;
///  - host: pinned (cudaMallocHost) host-to-device and device-to-host copies
///    of `bytes`, and the time of an 8-byte copy each way as the latency.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cuda_runtime_api.h>

namespace mist::profiler {

/// GB/s (1e9 bytes) of read + write traffic.
double deviceCopyGBs(size_t bytes, int warmup, int repeats, cudaStream_t stream);

struct HostLinks {
  double h2dGBs = 0, d2hGBs = 0;
  double latencyUs = 0; ///< the mean of the two small copies
};
HostLinks measureHostLinks(size_t bytes, int warmup, int repeats, cudaStream_t stream);

} // namespace mist::profiler
