//===- IRParser.h - Reads the textual IR back ------------------------------===//
/// \file
/// Parses what printModule() writes (`mistc -x ir file.mir`), so every pass
/// can be tested on its own input. Errors are located diagnostics.
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/IR.h"
#include "support/Diagnostics.h"

namespace mist {

/// Parses the buffer `bufferId` of the diagnostic engine's source manager.
std::unique_ptr<Module> parseIR(unsigned bufferId, DiagnosticEngine &diag);

} // namespace mist
