//===- PlanLoader.h - Read a training plan --------------------------------===//
/// \file
/// Reads a plan file (DESIGN.md section 9, schema in docs/plan.md) into a
/// Plan with located errors, and checks what needs no model: the version,
/// contiguous layer ranges from 0, checkpointed layers within their stage,
/// offload ratios in [0, 1], dp * tp equal to the mesh's GPUs and
/// micro_batch * dp * grad_accum equal to global_batch on every stage.
/// Checks against a model (layer count, divisibility by tp, memory) are the
/// evaluator's. format/PlanWriter writes the same format.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Plan.h"
#include "support/Diagnostics.h"
#include <optional>

namespace mist {

/// Parses buffer `bufferId` of diag.sourceMgr(); nullopt after reporting
/// errors.
std::optional<Plan> loadPlan(unsigned bufferId, DiagnosticEngine &diag);

} // namespace mist
