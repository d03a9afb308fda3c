//===- ScratchPlanner.h - Arenas for a stage's transient buffers ----------===//
/// \file
/// A stage's scratch buffers (the forward's intermediates that no backward
/// reads, and the activation gradients) live only while the region run
/// that uses them goes on. Each run kind (the forward and the backward of
/// pre, the layer and post) gets one arena, which the trainer holds only
/// during such a run (runtime/trainer/StageMemory.h); the emitter gives
/// each buffer an offset in its run's arena such that two buffers live at
/// the same time never overlap. So the trainer's transient
/// memory is the running region's live set, as the performance model
/// counts it phase by phase, not the sum of all buffers.
//===----------------------------------------------------------------------===//
#pragma once

#include "backend/trainer/Lowering.h"
#include <array>
#include <cstdint>
#include <vector>

namespace mist {

struct ScratchPlan {
  /// Per buffer: the run whose arena holds it (2 x region + 1 for a
  /// backward: 0 pre forward, 1 pre backward, 2 layer forward, ... 5 post
  /// backward) and the offset in bytes; -1 for a buffer that is not
  /// scratch, or that two kinds of run use (it gets memory of its own).
  std::vector<int> run;
  std::vector<int64_t> offset;
  std::array<int64_t, 6> bytes{}; ///< each run kind's arena
};

/// Buffer liveness is by op position within each region run: the forward
/// and the backward of pre (when `first`), the layer, and post (when
/// `last`). A run's inputs are live from its start (the runtime writes them
/// before the call) and its outputs to its end (the runtime reads them
/// after). Offsets are 256-byte aligned (cuBLAS's preference).
ScratchPlan planScratch(const LoweredStage &stage, const std::vector<bool> &scratch, bool first,
                        bool last);

} // namespace mist
