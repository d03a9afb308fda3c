//===- OffloadEngine.cpp - Moving the tails of tensors to host memory -----===//
#include "runtime/trainer/OffloadEngine.h"

#include "runtime/comm/MpiCommunicator.h"
#include <algorithm>
#include <cmath>

namespace mist::rt {

void OffloadEngine::swapOut(std::vector<float> &device, std::vector<float> &host, double fraction) {
  if (!host.empty())
    abortJob("offload: a tensor was swapped out twice");
  const size_t n = device.size();
  const size_t tail = std::min(n, static_cast<size_t>(std::floor(double(n) * fraction)));
  if (tail == 0)
    return;
  host.assign(device.end() - std::ptrdiff_t(tail), device.end());
  device.resize(n - tail);
  device.shrink_to_fit(); // the point of offloading: the device copy is gone
  inHost += tail * sizeof(float);
  moved += tail * sizeof(float);
  peakInHost = std::max(peakInHost, inHost);
}

void OffloadEngine::swapIn(std::vector<float> &device, std::vector<float> &host) {
  if (host.empty())
    return;
  device.insert(device.end(), host.begin(), host.end());
  inHost -= host.size() * sizeof(float);
  moved += host.size() * sizeof(float);
  std::vector<float>().swap(host);
}

void OffloadEngine::copyOut(const float *device, size_t n, std::vector<float> &host) {
  if (!host.empty())
    abortJob("offload: a tensor was copied out twice");
  host.assign(device, device + n);
  inHost += n * sizeof(float);
  moved += n * sizeof(float);
  peakInHost = std::max(peakInHost, inHost);
}

void OffloadEngine::copyIn(float *device, std::vector<float> &host) {
  std::copy(host.begin(), host.end(), device);
  inHost -= host.size() * sizeof(float);
  moved += host.size() * sizeof(float);
  std::vector<float>().swap(host);
}

} // namespace mist::rt
