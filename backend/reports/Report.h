//===- Report.h - Predicted figures of a plan (--emit=report) -------------===//
/// \file
/// Per stage: the knobs, predicted t and d, each stream's busy time, the
/// exposed communication, peak memory broken down; then the pipeline total
/// with tokens/s and model TFLOP/s per GPU.
//===----------------------------------------------------------------------===//
#pragma once

#include "perfmodel/StageModel.h"
#include "llvm/Support/raw_ostream.h"

namespace mist {

/// A compact table: one line per stage and the totals.
void printPlanSummary(const Plan &plan, const PipelineEstimate &est, const Cluster &cluster,
                      const ModelProfile &model, llvm::raw_ostream &os);

void printReport(const Plan &plan, const PipelineEstimate &est, const Cluster &cluster,
                 const ModelProfile &model, llvm::raw_ostream &os);

} // namespace mist
