//===- TrainerEmitter.h - Writes train.cu for a plan ----------------------===//
/// \file
/// `mistc model.mist --cluster C --plan plan.yaml --emit=trainer -o train.cu`
/// writes host C++ with the model as tables and straight-line functions (one
/// per region and direction, one call per IR op, each with its IR line as a
/// comment) and a main that hands them to runtime/trainer (runTrainer). No
/// kernels are in the file. This version emits plans of one stage with
/// tp = 1, no ZeRO and no checkpointing, on any number of data-parallel MPI
/// ranks; the rest of the multi-rank schedule is docs/trainer-design.md's
/// next step, and other plans get a clear error.
//===----------------------------------------------------------------------===//
#pragma once

#include "backend/Lowering.h"
#include "passes/perf/Plan.h"
#include "support/Diagnostics.h"
#include "llvm/Support/raw_ostream.h"

namespace mist {

struct TrainerSource {
  std::string modelFile;          ///< for the header comment
  std::string sourceRoot;         ///< the mistc checkout, for the build line
  std::string buildDir;           ///< where the runtime libraries were built
  double modelFlopsPerSample = 0; ///< the report's model FLOPs (no recompute), for logging
};

/// False after reporting why the plan cannot be emitted yet.
bool emitTrainer(const Module &m, const Plan &plan, const TrainerSource &src,
                 DiagnosticEngine &diag, llvm::raw_ostream &os);

} // namespace mist
