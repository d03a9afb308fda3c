//===- PlanWriter.h - Write a training plan as YAML -----------------------===//
/// \file
/// Writes a Plan in the format yaml/PlanLoader reads (docs/plan.md):
/// fixed key order, every stage key spelled out, reals in their shortest
/// round-trip form, so the output is deterministic and
/// loadPlan(writePlan(p)) == p for every valid plan.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Plan.h"
#include "llvm/Support/raw_ostream.h"

namespace mist {

void writePlan(const Plan &plan, llvm::raw_ostream &os);

/// `s` as a YAML scalar: plain when that reads back as the same string,
/// double-quoted with escapes otherwise.
std::string yamlQuote(const std::string &s);

} // namespace mist
