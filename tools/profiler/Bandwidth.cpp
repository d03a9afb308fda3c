//===- Bandwidth.cpp - Device memory and host link bandwidth --------------===//
#include "tools/profiler/Bandwidth.h"

#include "tools/profiler/DeviceBuffer.h"
#include "tools/profiler/EventTimer.h"

namespace mist::profiler {

double deviceCopyGBs(size_t bytes, int warmup, int repeats, cudaStream_t stream) {
  DeviceBuffer<char> src(bytes), dst(bytes);
  double t = medianSeconds(stream, warmup, repeats, [&] {
    checkCuda(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, stream),
              "cudaMemcpyAsync (device to device)");
  });
  return 2.0 * bytes / t / 1e9;
}

HostLinks measureHostLinks(size_t bytes, int warmup, int repeats, cudaStream_t stream) {
  DeviceBuffer<char> dev(bytes);
  PinnedBuffer host(bytes);
  auto copy = [&](cudaMemcpyKind kind, size_t n) {
    void *dst = kind == cudaMemcpyHostToDevice ? static_cast<void *>(dev.get()) : host.get();
    const void *src = kind == cudaMemcpyHostToDevice ? host.get() : static_cast<void *>(dev.get());
    return medianSeconds(stream, warmup, repeats, [&] {
      checkCuda(cudaMemcpyAsync(dst, src, n, kind, stream), "cudaMemcpyAsync (host)");
    });
  };
  HostLinks l;
  l.h2dGBs = bytes / copy(cudaMemcpyHostToDevice, bytes) / 1e9;
  l.d2hGBs = bytes / copy(cudaMemcpyDeviceToHost, bytes) / 1e9;
  l.latencyUs = (copy(cudaMemcpyHostToDevice, 8) + copy(cudaMemcpyDeviceToHost, 8)) / 2 * 1e6;
  return l;
}

} // namespace mist::profiler
