//===- SlotArena.cpp - Memory reserved once, handed out in equal slots ----===//
#include "runtime/trainer/SlotArena.h"

#include "runtime/comm/MpiCommunicator.h"
#include "runtime/device/Device.h"

namespace mist::rt {

SlotArena::SlotArena(size_t slotBytes, int slots, const std::string &what)
    : what(what), stride((slotBytes + 63) / 64 * 64), slotCount(slots) {
  const size_t total = stride * size_t(slots);
  if (slots < 0 || (slots > 0 && total / size_t(slots) != stride))
    abortJob("out of memory: " + what + " would need more bytes than can be addressed");
  // device::allocate ends the job with the sizes when the memory is not there.
  const std::string purpose = what + " (" + std::to_string(slots) + " slots of " +
                              std::to_string(stride) + " bytes)";
  storage.reset(static_cast<std::byte *>(device::allocate(total, purpose.c_str())));
  for (int s = slots - 1; s >= 0; --s)
    freeSlots.push_back(s);
}

void SlotArena::Free::operator()(std::byte *p) const { device::release(p); }

int SlotArena::acquire() {
  if (freeSlots.empty())
    abortJob(what + ": all " + std::to_string(slotCount) +
             " slots are taken; the schedule keeps more in flight than the plan reserved for");
  int s = freeSlots.back();
  freeSlots.pop_back();
  return s;
}

void SlotArena::release(int slot) { freeSlots.push_back(slot); }

} // namespace mist::rt
