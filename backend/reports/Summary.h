//===- Summary.h - Human-readable model summary (--emit=summary) ----------===//
/// \file
/// Parameter counts per region and in total (unsharded, tp = 1), and the
/// per-layer costs symbolically and at b = 1, tp = 1. Needs a costed module.
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/IR.h"
#include "llvm/Support/raw_ostream.h"

namespace mist {

/// Total trainable parameters of the full model (tp = 1); nullopt when a
/// count is not a whole number (unbound symbols).
std::optional<int64_t> countParameters(const Module &m);

void printSummary(const Module &m, llvm::raw_ostream &os);

} // namespace mist
