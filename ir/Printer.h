//===- Printer.h - Deterministic textual IR -------------------------------===//
/// \file
/// Prints a module in the textual form that IRParser reads back (`-x ir`).
/// Output depends only on the module: attributes are sorted, expressions use
/// printExpr(), names come from the source.
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/IR.h"
#include "llvm/Support/raw_ostream.h"

namespace mist {

void printModule(const Module &m, llvm::raw_ostream &os);
std::string formatReal(double v); ///< shortest text that parses back to v

} // namespace mist
