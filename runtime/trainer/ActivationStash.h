//===- ActivationStash.h - Activations of micro-batches in flight ---------===//
/// \file
/// Under 1F1B stage i holds the activations of up to S - i micro-batches
/// between their forward and backward, while the frames hold the working
/// buffers of the micro-batch being computed. After a forward the stash
/// copies that micro-batch's activations (the buffers the forward reads or
/// writes, but not the parameters and their gradients, nor the buffers a
/// checkpointed layer drops and recomputes) into one slot of an arena
/// reserved at start for as many micro-batches as the stage's 1F1B order
/// keeps in flight; before the backward it copies them back. The plan's
/// activation offload ratio sends the tail of each float buffer to host
/// memory instead (OffloadEngine): the copies run on the d2h and h2d streams,
/// fenced with the compute stream (the frames are rewritten by the next
/// micro-batch).
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/trainer/OffloadEngine.h"
#include "runtime/trainer/SlotArena.h"
#include "runtime/trainer/Streams.h"
#include "runtime/trainer/Trainer.h"
#include <map>
#include <optional>

namespace mist::rt {

class ActivationStash {
public:
  ActivationStash(const StageSpec &stage, OffloadEngine &offload, Streams &streams);
  /// Copies micro-batch `mb`'s activations out of the frames.
  void save(int mb, Frame &global, std::vector<Frame> &layers);
  /// Copies them back into the frames and frees the slot.
  void restore(int mb, Frame &global, std::vector<Frame> &layers);

  size_t inFlight() const { return saved.size(); }
  int slots() const { return arena->slots(); }
  size_t reservedBytes() const { return arena->reservedBytes(); }

  /// The buffers a checkpointed layer drops after its forward and recomputes
  /// before its backward: its float buffers but the parameters, their
  /// gradients and the layer's input.
  static std::vector<int> checkpointReleased(const StageSpec &stage);
  /// The most micro-batches between forward and backward at once in `order`.
  static int maxInFlight(const std::vector<ScheduleEntry> &order);

private:
  struct Entry {
    int layer; ///< -1: the global frame
    int buffer;
    size_t elements; ///< of the buffer
    size_t kept;     ///< of them in the slot; the rest goes to host memory
    size_t offset;   ///< bytes into the slot
    bool ids;
  };
  DeviceArray<float> &floats(Frame &global, std::vector<Frame> &layers, const Entry &e);
  DeviceArray<int32_t> &ids(Frame &global, std::vector<Frame> &layers, const Entry &e);

  const StageSpec &spec;
  OffloadEngine &offload;
  Streams &streams;
  std::vector<Entry> entries;
  std::optional<SlotArena> arena;
  std::map<int, int> saved; ///< micro-batch -> its slot
  /// [slot][entry]: the offloaded tails, pinned host memory kept across steps.
  std::vector<std::vector<HostArray<float>>> hostTails;
};

} // namespace mist::rt
