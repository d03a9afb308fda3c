//===- PlanLoader.h - Read a training plan --------------------------------===//
/// \file
/// Reads a plan file (DESIGN.md section 9, schema in docs/plan.md) into a
/// Plan with located errors, and checks what needs no model: the version,
/// contiguous layer ranges from 0, checkpointed layers within their stage,
/// offload ratios in [0, 1], dp * tp equal to the mesh's GPUs and
/// micro_batch * dp * grad_accum equal to global_batch on every stage.
/// Checks against a model (layer count, divisibility by tp, memory) are the
/// evaluator's. yaml/PlanWriter writes the same format.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Plan.h"
#include "support/Diagnostics.h"
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mist {

/// Where a loaded plan file says what: its top-level keys and each stage's
/// keys, so that checks against a model can point at the plan.
struct PlanLocations {
  std::map<std::string, llvm::SMLoc> top;                 ///< "grad_accum", "stages", ...
  std::vector<std::map<std::string, llvm::SMLoc>> stages; ///< per stage: "layers", "tp", ...
  /// The value of `key` of stage `stage` (-1: top level), else the
  /// stage's entry, else the stages list, else nowhere.
  llvm::SMLoc of(int stage, const std::string &key) const;
};

/// Parses buffer `bufferId` of diag.sourceMgr(); nullopt after reporting
/// errors. `locations`, when given, receives where each key is.
std::optional<Plan> loadPlan(unsigned bufferId, DiagnosticEngine &diag,
                             PlanLocations *locations = nullptr);

} // namespace mist
