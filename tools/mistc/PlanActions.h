//===- PlanActions.h - Tune, report and trace plans for a cluster ---------===//
/// \file
/// What the driver does after the pass pipeline when a cluster is given:
/// load (or tune) a plan, then write it (--emit=plan), its report
/// (--emit=report) or its predicted timeline (--emit=timeline); or list
/// the measured-op lookups of a plan's stages or of the tuner's stage
/// shapes (--emit=profile-shapes, which needs no cluster with a plan).
//===----------------------------------------------------------------------===//
#pragma once

#include "backend/TrainerEmitter.h"
#include "ir/IR.h"
#include "support/Diagnostics.h"
#include "tools/mistc/Emit.h"
#include "tuner/Tuner.h"
#include "llvm/Support/raw_ostream.h"

namespace mist {

struct PlanActionOptions {
  std::string cluster;                 ///< preset name or YAML path (ProfileShapes: may be empty)
  int nodes = 0;                       ///< overrides the cluster's node count when > 0
  std::vector<std::string> presetDirs; ///< where preset names are looked up
  std::string planPath;                ///< a plan to evaluate instead of tuning
  TunerOptions tuner;
  Emit output = Emit::Report;   ///< one that actsOnPlan
  bool summaryToStdout = false; ///< the plan goes to a file: print the summary on stdout
  TrainerSource trainer;        ///< for --emit=trainer
};

/// Returns the process exit status.
int runPlanActions(const Module &m, const PlanActionOptions &opts, DiagnosticEngine &diag,
                   llvm::raw_ostream &out);

} // namespace mist
