//===- PlanActions.h - Tune, report and trace plans for a cluster ---------===//
/// \file
/// What the driver does after the pass pipeline when a cluster is given:
/// load (or tune) a plan, then write it (--emit=plan), its report
/// (--emit=report) or its predicted timeline (--emit=timeline); or list
/// the measured-op lookups of a plan's stages or of the tuner's stage
/// shapes (--emit=profile-shapes, which needs no cluster with a plan).
//===----------------------------------------------------------------------===//
#pragma once

#include "backend/trainer/TrainerEmitter.h"
#include "ir/IR.h"
#include "support/Diagnostics.h"
#include "tools/mistc/Emit.h"
#include "tuner/Tuner.h"
#include "llvm/Support/raw_ostream.h"

namespace mist {

struct PlanActionOptions {
  /// --cluster: a preset name or YAML path. Empty: the train section's
  /// `cluster`, else the --plan file's `cluster` when it names a preset
  /// (ProfileShapes with a plan needs none).
  std::string cluster;
  int nodes = 0;                       ///< overrides the cluster's node count when > 0
  std::vector<std::string> presetDirs; ///< where preset names are looked up
  std::string planPath;                ///< a plan to evaluate instead of tuning
  std::string planOut;                 ///< where to write the tuned plan too (empty: nowhere)
  TunerOptions tuner;
  Emit output = Emit::Report;   ///< one that actsOnPlan
  bool summaryToStdout = false; ///< the plan goes to a file: print the summary on stdout
  TrainerSource trainer;        ///< for --emit=trainer
  /// --force: write an export whose plan or projection does not fit (else an error).
  bool forceExport = false;
  /// --projected-plan: where an export writes the plan it runs (empty: nowhere).
  std::string projectedPlanOut;
};

/// Returns the process exit status. A plan with sequence parallelism
/// rewrites `m` into the module its trainer runs (--emit=trainer, lowered).
int runPlanActions(Module &m, const PlanActionOptions &opts, DiagnosticEngine &diag,
                   llvm::raw_ostream &out);

} // namespace mist
