//===- TrainerEmitter.h - Writes train.cu for a plan ----------------------===//
/// \file
/// `mistc model.mist --cluster C --plan plan.yaml --emit=trainer -o train.cu`
/// writes host C++ with the model as tables and straight-line functions (one
/// per region and direction, one call per IR op, each with its IR line as a
/// comment) and a main that hands them to runtime/trainer (runTrainer). No
/// kernels are in the file. Every stage of the plan gets its own functions
/// (lowered at its micro-batch and tp) and a `stageN()` that returns its
/// tables, knobs and 1F1B order; each rank runs the stage it is placed on.
/// Plans that split weights without gradients, or gradients without the
/// optimizer state, and models with dropout p > 0, get a clear error.
//===----------------------------------------------------------------------===//
#pragma once

#include "backend/trainer/Lowering.h"
#include "format/Plan.h"
#include "support/Diagnostics.h"
#include "llvm/Support/raw_ostream.h"

namespace mist {

struct TrainerSource {
  std::string modelFile;                ///< for the header comment
  std::string outputFile;               ///< -o: names the file and the program in the header
  double modelFlopsPerSample = 0;       ///< the report's model FLOPs (no recompute), for logging
  std::string deviceName;               ///< the cluster's device, for the MFU line
  double devicePeakTflops = 0;          ///< its dense bf16 peak: MFU = model FLOP/s / this
  std::string planFile;                 ///< the plan's file (--plan, or where the tuned one went)
  bool planTuned = false;               ///< tuned by this run (else read from planFile)
  std::string clusterName;              ///< the cluster the plan was tuned or priced for
  int gpusPerNode = 1;                  ///< its nodes' GPUs, for the placement check and sbatch
  bool tpAcrossNodes = false;           ///< whether it lets a tp group span nodes
  double predictedIterationSeconds = 0; ///< the pipeline formula's (what the tuner minimizes)
};

/// False after reporting why the plan cannot be emitted yet.
bool emitTrainer(const Module &m, const Plan &plan, const TrainerSource &src,
                 DiagnosticEngine &diag, llvm::raw_ostream &os);

} // namespace mist
