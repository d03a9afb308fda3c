//===- OffloadEngine.h - Moving the tails of tensors to host memory -------===//
/// \file
/// A plan's offload ratios say what fraction of each stage's weights,
/// gradient sums, optimizer state and stashed activations lives in host
/// memory between uses. The engine moves the tail of a tensor (the last
/// `fraction` of its elements) out to pinned host memory and back before it
/// is needed, and counts the bytes. The moves are device copies on the
/// current stream (the caller runs them on the h2d and d2h streams). On CPU
/// ranks "device" and host are the same memory, so offloading saves nothing
/// there, but every byte takes the same path as on GPUs and the equivalence
/// tests prove it comes back intact.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/device/DeviceTensor.h"
#include <cstddef>
#include <mutex>

namespace mist::rt {

class OffloadEngine {
public:
  /// Moves the last `fraction` (0..1) of `device`'s elements to `host`
  /// (which must be empty) and shrinks `device` to the rest.
  void swapOut(DeviceTensor &device, HostBytes &host, double fraction);
  /// Appends `host` back to `device` and empties `host`.
  void swapIn(DeviceTensor &device, HostBytes &host);
  /// Copies `bytes` at `device` to `host` (which must be empty), and back
  /// (emptying `host`): for tensors whose device copy lives elsewhere.
  void copyOut(const void *device, size_t bytes, HostBytes &host);
  void copyIn(void *device, HostBytes &host);
  /// Copies a held tail to device memory and back, the host copy staying
  /// where it is (the optimizer's offloaded state, stepped in a staging
  /// buffer): only the moved bytes are counted.
  void stageIn(void *device, const HostBytes &host);
  void stageOut(const void *device, HostBytes &host);

  size_t hostBytes() const { return inHost; }         ///< held in host memory now
  size_t peakHostBytes() const { return peakInHost; } ///< the most ever held at once
  size_t movedBytes() const { return moved; }         ///< both ways, since the start

private:
  /// `bytes` more (or fewer) held and `moved` more moved: the h2d and d2h
  /// streams count at once when they run on threads of their own.
  void count(std::ptrdiff_t held, size_t movedNow);
  std::mutex counting;
  size_t inHost = 0, peakInHost = 0, moved = 0;
};

} // namespace mist::rt
