//===- Verifier.h - Structural and type invariants of a module ------------===//
/// \file
/// Checks what every pass must preserve: values defined before use and in
/// scope (module inputs everywhere; `pre` parameters also in `post`, for tied
/// weights), partial sums consumed only by all_reduce, matching block
/// interfaces between regions, typed values once the module is shaped.
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/IR.h"
#include "support/Diagnostics.h"
#include "support/LogicalResult.h"

namespace mist {

LogicalResult verifyModule(const Module &m, DiagnosticEngine &diag);

} // namespace mist
