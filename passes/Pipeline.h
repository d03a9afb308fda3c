//===- Pipeline.h - The one definition of mistc's pass pipeline -----------===//
/// \file
/// Which passes run, in which order: the default pipeline (every registered
/// pass, in registry order, cost-model only when costs are wanted) or an
/// explicit list. The driver, the library entry point runPipeline, the
/// benchmarks and the fuzzers all build their pipeline here.
//===----------------------------------------------------------------------===//
#pragma once

#include "passes/Pass.h"

#include <optional>
#include <string>
#include <vector>

namespace mist {

struct PipelineRequest {
  /// Exactly these passes (--passes); nullopt: the default pipeline.
  std::optional<std::vector<std::string>> passes;
  /// Whether the default pipeline ends with cost-model (not for --emit=ir).
  bool withCosts = true;
  /// The module was parsed from IR: an explicit list re-checks its types
  /// with shape-infer first, and the default pipeline skips passes whose
  /// effect the module's state records.
  bool fromIR = false;
};

/// Adds the requested passes to `pm`; an unknown name is an error.
bool buildPipeline(PassManager &pm, const Module &m, const PipelineRequest &request,
                   DiagnosticEngine &diag);

/// Runs the default pipeline (`passes` empty) or exactly `passes`, then the
/// verifier.
bool runPipeline(Module &m, const std::vector<std::string> &passes, DiagnosticEngine &diag);

/// The module a plan with sequence parallelism trains: a differentiated,
/// tp-sharded module's backward dropped, the sequence-parallel pass run and
/// the backward derived again, then verified. Nothing to do when it is
/// applied already.
bool applySequenceParallel(Module &m, DiagnosticEngine &diag);

} // namespace mist
