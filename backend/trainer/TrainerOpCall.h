//===- TrainerOpCall.h - One lowered op as a call to runtime/ops ----------===//
/// \file
/// The line train.cu runs for one IR op: `linear(L.at(buf::y), ...);`, its
/// buffers reached through the region function's frames and its sizes
/// written in the model's symbols (backend/TrainerSizes).
//===----------------------------------------------------------------------===//
#pragma once

#include "backend/trainer/Lowering.h"
#include "backend/trainer/TrainerSizes.h"

#include <string>
#include <vector>

namespace mist {

/// How a stage's region functions name its buffers and sizes.
struct OpCallNaming {
  const LoweredStage &st;
  /// Per buffer: how a region function reaches it (`G.at(buf::x)`,
  /// `L.ids(buf::tokens)`).
  const std::vector<std::string> &refs;
  TrainerSizes &sizes;
};

/// One op as a call to runtime/ops into `out`; false for an op the CPU ops
/// lack.
bool runtimeOpCall(const LoweredOp &op, const OpCallNaming &naming, std::string &out);

/// Two consecutive ops as one fused call into `out`, where runtime/ops has
/// one: a column-parallel linear and the tanh GELU of its output
/// (`linearGelu`), a linear's gradient and the GELU gradient of its input's
/// gradient (`linearGradGelu`), a residual add and the norm of its sum
/// (`addLayerNorm`, `addRmsNorm`). The caller checks that nothing else reads
/// what the fused call may leave unwritten (the linear gradient's dx).
bool fusedRuntimeOpCall(const LoweredOp &first, const LoweredOp &second, const OpCallNaming &naming,
                        std::string &out);

} // namespace mist
