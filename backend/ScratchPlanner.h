//===- ScratchPlanner.h - One arena for a stage's transient buffers -------===//
/// \file
/// A stage's scratch buffers (the forward's intermediates that no backward
/// reads, and the activation gradients) live only while the region that
/// uses them runs. The emitter gives each an offset in one arena such that
/// two buffers that are live at the same time in some region run never
/// overlap; the trainer reserves the arena once (runtime/trainer/
/// StageMemory.h). So the trainer's transient memory is one region's live
/// set, as the performance model counts it, not the sum of all buffers.
//===----------------------------------------------------------------------===//
#pragma once

#include "backend/Lowering.h"
#include <cstdint>
#include <vector>

namespace mist {

struct ScratchPlan {
  std::vector<int64_t> offset; ///< bytes into the arena, per buffer; -1: not scratch
  int64_t bytes = 0;           ///< the arena's size
};

/// Buffer liveness is by op position within each region run: the forward
/// and the backward of pre (when `first`), the layer, and post (when
/// `last`). A run's inputs are live from its start (the runtime writes them
/// before the call) and its outputs to its end (the runtime reads them
/// after). Offsets are 256-byte aligned (cuBLAS's preference).
ScratchPlan planScratch(const LoweredStage &stage, const std::vector<bool> &scratch, bool first,
                        bool last);

} // namespace mist
