//===- Frontend.h - Source text to IR in one call -------------------------===//
/// \file
/// Load (with imports) -> Sema -> IRGen, the path shared by the mistc driver,
/// the unit tests and the parser fuzzer. The passes come after
/// (passes/Pipeline.h).
//===----------------------------------------------------------------------===//
#pragma once

#include "frontend/IRGen.h"
#include "frontend/Sema.h"

namespace mist {

struct FrontendOptions {
  LoadOptions load;
  GenOptions gen;
};

/// Compiles buffer `bufferId` of the diagnostic engine's source manager;
/// null after reporting errors.
std::unique_ptr<Module> compileMist(unsigned bufferId, const FrontendOptions &opts,
                                    DiagnosticEngine &diag);

} // namespace mist
