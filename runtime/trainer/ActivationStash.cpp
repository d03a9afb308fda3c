//===- ActivationStash.cpp - Activations of micro-batches in flight -------===//
#include "runtime/trainer/ActivationStash.h"

#include "runtime/comm/MpiCommunicator.h"
#include <algorithm>

namespace mist::rt {

int ActivationStash::maxInFlight(const std::vector<ScheduleEntry> &order) {
  int now = 0, most = 0;
  for (const ScheduleEntry &e : order) {
    now += e.forward ? 1 : -1;
    most = std::max(most, now);
  }
  return most;
}

ActivationStash::ActivationStash(const StageSpec &stage, StageMemory &memory,
                                 OffloadEngine &offload, Streams &streams)
    : spec(stage), memory(memory), offload(offload), streams(streams) {
  for (int s = memory.slots() - 1; s >= 0; --s)
    freeSlots.push_back(s);
  hostTails.resize(size_t(memory.slots()));
  for (int s = 0; s < memory.slots(); ++s)
    hostTails[size_t(s)].resize(memory.slotFloats(s).size());
}

void ActivationStash::begin(int mb) {
  if (slotOf.count(mb))
    abortJob("the schedule runs the forward of micro-batch " + std::to_string(mb) + " twice");
  if (freeSlots.empty())
    abortJob("the activations of the micro-batches in flight: all " +
             std::to_string(memory.slots()) +
             " slots are taken; the schedule keeps more in flight than the plan reserved for");
  const int slot = freeSlots.back();
  freeSlots.pop_back();
  slotOf[mb] = slot;
  memory.bindSlot(slot);
  memory.refillSlot(); // what the last backward from this slot freed
}

void ActivationStash::save(int mb) {
  auto it = slotOf.find(mb);
  if (it == slotOf.end())
    abortJob("the schedule stashes micro-batch " + std::to_string(mb) + " before its forward");
  if (spec.offloadActivations <= 0)
    return; // the slot holds them until the backward
  const int slot = it->second;
  std::vector<DeviceTensor *> arrays = memory.slotFloats(slot);
  streams.runFenced(StreamKind::D2H, "stash activations " + std::to_string(mb), [&] {
    for (size_t k = 0; k < arrays.size(); ++k)
      offload.swapOut(*arrays[k], hostTails[size_t(slot)][k], spec.offloadActivations);
  });
}

void ActivationStash::restore(int mb) {
  auto it = slotOf.find(mb);
  if (it == slotOf.end())
    abortJob("the schedule runs the backward of micro-batch " + std::to_string(mb) +
             " before its forward");
  const int slot = it->second;
  memory.bindSlot(slot);
  if (spec.offloadActivations > 0) {
    std::vector<DeviceTensor *> arrays = memory.slotFloats(slot);
    streams.runFenced(StreamKind::H2D, "unstash activations " + std::to_string(mb), [&] {
      for (size_t k = 0; k < arrays.size(); ++k)
        offload.swapIn(*arrays[k], hostTails[size_t(slot)][k]);
    });
  }
  // Later forwards run after this backward (the order is per rank), so the
  // slot can be handed out again.
  slotOf.erase(it);
  freeSlots.push_back(slot);
}

} // namespace mist::rt
