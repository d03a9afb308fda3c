//===- ActivationStash.h - Activations of micro-batches in flight ---------===//
/// \file
/// Under 1F1B stage i keeps the activations of up to S - i micro-batches
/// between their forward and backward. Each gets a slot of the stage's
/// memory (runtime/trainer/StageMemory.h) when its forward begins; the
/// frames point into that slot while the forward computes, and again while
/// its backward runs, so activations are never copied. The plan's
/// activation offload ratio sends the tail of every float activation of the
/// slot to pinned host memory (d2h stream) and brings it back (h2d stream),
/// both fenced with the compute stream, a layer at a time where the stage
/// schedule's swap steps are (docs/schedule.md, "Issue order"): a layer's
/// goes out when the forward of the layer after next begins, so one layer's
/// tail is in flight beside each forward; it comes back while the layer
/// after it runs its backward (the last two when the backward begins). The global frame
/// (pre's and post's activations) goes out after the whole forward and comes
/// back when the backward begins.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/trainer/OffloadEngine.h"
#include "runtime/trainer/StageMemory.h"
#include "runtime/trainer/Streams.h"
#include "schedule/Schedule.h"
#include <map>

namespace mist::rt {

class ActivationStash {
public:
  ActivationStash(const StageSpec &stage, StageMemory &memory, OffloadEngine &offload,
                  Streams &streams);
  /// Micro-batch `mb`'s forward through the stage's chunk `chunk` begins:
  /// chunk 0's takes a free slot, a later chunk's finds the micro-batch's;
  /// the slot is bound to the frames, and the chunk's layers (and, for the
  /// first chunk, the global frame) get memory.
  void begin(int mb, int chunk = 0);
  /// Layer `layer`'s forward of the micro-batch under way begins: its saved
  /// activations get their memory (with activation offload; else `begin`
  /// gave every layer's).
  void prepareLayer(int layer);
  /// Layer `layer` of micro-batch `mb` is done with its forward: its
  /// offloaded tail goes to host memory (once; again is a no-op).
  void saveLayer(int mb, int layer);
  /// Its forward through `chunk` is done: the slot keeps its activations
  /// (the offloaded tail of the chunk's layers not sent yet, and of the
  /// global frame after the chunk that runs pre or post, goes out).
  void save(int mb, int chunk = 0);
  /// Its backward through `chunk` begins: the frames point at its slot
  /// again, the global frame's offloaded tail comes back for the chunk that
  /// runs pre or post (the layers' by restoreLayer, as the schedule's
  /// swap-in steps say), and after chunk 0's the slot is free for a forward
  /// after this backward.
  void restore(int mb, int chunk = 0);
  /// Layer `layer`'s offloaded tail comes back for the backward under way
  /// (once; again is a no-op).
  void restoreLayer(int layer);

  size_t inFlight() const { return slotOf.size(); }
  int slots() const { return memory.slots(); }
  size_t reservedBytes() const { return memory.slotBytes() * size_t(memory.slots()); }

  /// The most micro-batches between their first forward and last backward
  /// at once in `order` (schedule/Schedule.h).
  static int maxInFlight(const std::vector<ScheduledRun> &order);

private:
  const StageSpec &spec;
  StageMemory &memory;
  OffloadEngine &offload;
  Streams &streams;
  std::map<int, int> slotOf; ///< micro-batch -> its slot, from begin to restore
  int backwardSlot = -1;     ///< the slot of the backward under way (restoreLayer's)
  /// Moves the offloaded tails of one frame (0 global, 1 + l layer l) of a
  /// slot out to host memory or back in.
  void moveFrame(int slot, int frame, bool out, const std::string &what);
  std::vector<int> freeSlots;
  /// The slot of micro-batch `mb`'s forward through `chunk`: a free one for
  /// chunk 0, the micro-batch's own after (a wrong order ends the job).
  int slotFor(int mb, int chunk);
  /// The stage's layers of chunk `chunk`: [first, first + count).
  int chunkFirstLayer(int chunk) const { return chunk * (spec.layers / spec.chunks); }
  int chunkLayers() const { return spec.layers / spec.chunks; }
  /// The chunk whose runs use the global frame: pre's (chunk 0) on the first
  /// stage, post's (the last) on the others.
  int globalChunk() const { return spec.tokensBuffer >= 0 ? 0 : spec.chunks - 1; }
  /// [slot][frame][activation]: the offloaded tails, pinned host memory kept across steps.
  std::vector<std::vector<std::vector<HostBytes>>> hostTails;
};

} // namespace mist::rt
