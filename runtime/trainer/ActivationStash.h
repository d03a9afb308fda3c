//===- ActivationStash.h - Activations of micro-batches in flight ---------===//
/// \file
/// Under 1F1B stage i keeps the activations of up to S - i micro-batches
/// between their forward and backward. Each gets a slot of the stage's
/// memory (runtime/trainer/StageMemory.h) when its forward begins; the
/// frames point into that slot while the forward computes, and again while
/// its backward runs, so activations are never copied. The plan's
/// activation offload ratio sends the tail of every float activation of the
/// slot to pinned host memory after the forward (d2h stream) and brings it
/// back before the backward (h2d stream), both fenced with the compute
/// stream.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/trainer/OffloadEngine.h"
#include "runtime/trainer/StageMemory.h"
#include "runtime/trainer/Streams.h"
#include <map>

namespace mist::rt {

class ActivationStash {
public:
  ActivationStash(const StageSpec &stage, StageMemory &memory, OffloadEngine &offload,
                  Streams &streams);
  /// Micro-batch `mb`'s forward begins: a free slot, bound to the frames.
  void begin(int mb);
  /// Its forward is done: the slot keeps its activations (the offloaded tail
  /// goes to host memory).
  void save(int mb);
  /// Its backward begins: the frames point at its slot again, the offloaded
  /// tail comes back, and the slot is free for a forward after this backward.
  void restore(int mb);

  size_t inFlight() const { return slotOf.size(); }
  int slots() const { return memory.slots(); }
  size_t reservedBytes() const { return memory.slotBytes() * size_t(memory.slots()); }

  /// The most micro-batches between forward and backward at once in `order`.
  static int maxInFlight(const std::vector<ScheduleEntry> &order);

private:
  const StageSpec &spec;
  StageMemory &memory;
  OffloadEngine &offload;
  Streams &streams;
  std::map<int, int> slotOf; ///< micro-batch -> its slot, from begin to restore
  std::vector<int> freeSlots;
  /// [slot][activation]: the offloaded tails, pinned host memory kept across steps.
  std::vector<std::vector<HostBytes>> hostTails;
};

} // namespace mist::rt
