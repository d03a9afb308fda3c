//===- OffloadEngine.cpp - Moving the tails of tensors to host memory -----===//
#include "runtime/trainer/OffloadEngine.h"

#include "runtime/comm/MpiCommunicator.h"
#include <algorithm>
#include <cmath>

namespace mist::rt {

void OffloadEngine::swapOut(DeviceArray<float> &device, HostArray<float> &host, double fraction) {
  if (!host.empty())
    abortJob("offload: a tensor was swapped out twice");
  const size_t n = device.size();
  const size_t tail = std::min(n, static_cast<size_t>(std::floor(double(n) * fraction)));
  if (tail == 0)
    return;
  copyOut(device.data() + (n - tail), tail, host);
  device.resize(n - tail); // the point of offloading: the device copy is gone
}

void OffloadEngine::swapIn(DeviceArray<float> &device, HostArray<float> &host) {
  if (host.empty())
    return;
  const size_t head = device.size();
  device.resize(head + host.size());
  copyIn(device.data() + head, host);
}

void OffloadEngine::copyOut(const float *device, size_t n, HostArray<float> &host) {
  if (!host.empty())
    abortJob("offload: a tensor was copied out twice");
  host.resize(n);
  device::copy(host.data(), device, n * sizeof(float));
  inHost += n * sizeof(float);
  moved += n * sizeof(float);
  peakInHost = std::max(peakInHost, inHost);
}

void OffloadEngine::stageIn(float *device, const HostArray<float> &host) {
  device::copy(device, host.data(), host.size() * sizeof(float));
  moved += host.size() * sizeof(float);
}

void OffloadEngine::stageOut(const float *device, HostArray<float> &host) {
  device::copy(host.data(), device, host.size() * sizeof(float));
  moved += host.size() * sizeof(float);
}

void OffloadEngine::copyIn(float *device, HostArray<float> &host) {
  device::copy(device, host.data(), host.size() * sizeof(float));
  inHost -= host.size() * sizeof(float);
  moved += host.size() * sizeof(float);
  // The pinned block is kept for the next swap out; the copy just enqueued
  // reads it, and nothing writes it before the next copyOut, which is
  // ordered after this copy by the streams' events.
  host.clear();
}

} // namespace mist::rt
