//===- FusedOps.h - Which consecutive ops the trainer runs as one ---------===//
/// \file
/// The trainer runs these pairs of consecutive lowered ops as one runtime op,
/// so that GPUs do them in one GEMM with a GELU epilogue or one row kernel:
///   - a linear layer that is not row-parallel and the tanh GELU of its
///     output (`linearGelu`: the GELU's input is also written, for the
///     backward);
///   - a linear layer's gradient and the tanh GELU gradient of its input's
///     gradient (`linearGradGelu`), when nothing else reads that input
///     gradient (a fused GEMM does not write it).
///   - a residual add and the LayerNorm or RMSNorm of its sum
///     (`addLayerNorm`, `addRmsNorm`: one row kernel, the sum still stored).
/// The emitter (TrainerEmitter.cpp) and the scratch planner
/// (ScratchPlanner.cpp) ask the same function, so a pair is one op for
/// both: every buffer the pair touches is live across both positions, and
/// no buffer the first op reads last can share memory with one the second
/// writes first (the fused GEMM reads the one while writing the other).
//===----------------------------------------------------------------------===//
#pragma once

#include "backend/trainer/Lowering.h"

#include <vector>

namespace mist {

/// fused[i]: ops[i] and ops[i + 1] run as one (never two pairs overlapping).
/// `outputs` are the run's results read after it (its yields).
std::vector<bool> fusedWithNext(const std::vector<LoweredOp> &ops, const std::vector<int> &outputs);

} // namespace mist
