//===- SlotArena.h - Memory reserved once, handed out in equal slots ------===//
/// \file
/// The activations a stage keeps between a micro-batch's forward and its
/// backward have the same size for every micro-batch, and 1F1B bounds how
/// many are kept at once. So their memory is reserved once, at start, from
/// the plan's sizes (slots x slot bytes), and handed out slot by slot: no
/// allocation during training, no fragmentation, and a plan that does not
/// fit fails at once with the sizes, not in the middle of a step. On GPU
/// ranks the reservation is one device allocation (runtime/device/Device.h).
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace mist::rt {

class SlotArena {
public:
  /// Reserves `slots` slots of `slotBytes` (rounded up to 64 bytes) for
  /// `what`; a reservation that fails ends the job (abortJob) with the sizes.
  SlotArena(size_t slotBytes, int slots, const std::string &what);

  /// A free slot; all taken ends the job (more in flight than reserved for).
  int acquire();
  void release(int slot);
  std::byte *at(int slot) { return storage.get() + size_t(slot) * stride; } ///< device memory

  size_t reservedBytes() const { return stride * size_t(slotCount); }
  int slots() const { return slotCount; }

private:
  std::string what;
  size_t stride;
  int slotCount;
  struct Free {
    void operator()(std::byte *p) const;
  };
  std::unique_ptr<std::byte, Free> storage; ///< 64-byte aligned
  std::vector<int> freeSlots;
};

} // namespace mist::rt
