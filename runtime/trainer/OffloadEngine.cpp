//===- OffloadEngine.cpp - Moving the tails of tensors to host memory -----===//
#include "runtime/trainer/OffloadEngine.h"

#include "runtime/comm/MpiCommunicator.h"
#include <algorithm>
#include <cmath>

namespace mist::rt {

void OffloadEngine::swapOut(DeviceTensor &device, HostBytes &host, double fraction) {
  if (!host.empty())
    abortJob("offload: a tensor was swapped out twice");
  const size_t n = device.size();
  const size_t tail = std::min(n, static_cast<size_t>(std::floor(double(n) * fraction)));
  if (tail == 0)
    return;
  copyOut(device.at(n - tail).data, tail * bytesOf(device.dtype()), host);
  device.resize(n - tail); // the point of offloading: the device copy is gone
}

void OffloadEngine::swapIn(DeviceTensor &device, HostBytes &host) {
  if (host.empty())
    return;
  const size_t head = device.size();
  device.resize(head + host.size() / bytesOf(device.dtype()));
  copyIn(device.at(head).data, host);
}

void OffloadEngine::copyOut(const void *device, size_t bytes, HostBytes &host) {
  if (!host.empty())
    abortJob("offload: a tensor was copied out twice");
  host.resize(bytes);
  device::copy(host.data(), device, bytes);
  count(std::ptrdiff_t(bytes), bytes);
}

void OffloadEngine::stageIn(void *device, const HostBytes &host) {
  device::copy(device, host.data(), host.size());
  count(0, host.size());
}

void OffloadEngine::stageOut(const void *device, HostBytes &host) {
  device::copy(host.data(), device, host.size());
  count(0, host.size());
}

void OffloadEngine::count(std::ptrdiff_t held, size_t movedNow) {
  std::lock_guard<std::mutex> guard(counting);
  inHost = size_t(std::ptrdiff_t(inHost) + held);
  moved += movedNow;
  peakInHost = std::max(peakInHost, inHost);
}

void OffloadEngine::copyIn(void *device, HostBytes &host) {
  device::copy(device, host.data(), host.size());
  count(-std::ptrdiff_t(host.size()), host.size());
  // The pinned block is kept for the next swap out; the copy just enqueued
  // reads it, and nothing writes it before the next copyOut, which is
  // ordered after this copy by the streams' events.
  host.clear();
}

} // namespace mist::rt
