//===- IRGen.h - Instantiates a model of the program as IR ----------------===//
/// \file
/// Evaluates one model instance: binds its parameters to symbols, evaluates
/// the train section, runs the pre / repeat / post statements with blocks
/// inlined, and emits untyped IR ops (shape-infer types them). Size
/// arithmetic is symbolic; exact divisions become `assume` clauses.
//===----------------------------------------------------------------------===//
#pragma once

#include "frontend/Sema.h"
#include "ir/IR.h"

namespace mist {

struct GenOptions {
  std::string modelName;   ///< instance to compile; empty = last in the main file
  int64_t seqLen = 0;      ///< overrides train.seq_len when non-zero
  int64_t globalBatch = 0; ///< overrides train.global_batch when non-zero
};

std::unique_ptr<Module> generateIR(const Program &program, const GenOptions &opts,
                                   DiagnosticEngine &diag);

} // namespace mist
