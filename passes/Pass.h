//===- Pass.h - Passes over a module and the manager that runs them -------===//
/// \file
/// A pass transforms a module or attaches analysis results to it; failure is
/// reported as diagnostics. Passes are created from the table in Passes.def
/// (no static registration). The manager runs a list of passes with optional
/// IR printing, verification and timing after each one.
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/IR.h"
#include "support/Diagnostics.h"
#include "support/LogicalResult.h"
#include "llvm/Support/raw_ostream.h"
#include <memory>
#include <set>

namespace mist {

class Pass {
public:
  virtual ~Pass();
  virtual llvm::StringRef argument() const = 0;
  /// True when the module already carries this pass's effect (the default
  /// pipeline then skips it for IR read back with `-x ir`).
  virtual bool alreadyApplied(const Module &m) const = 0;
  virtual LogicalResult run(Module &m, DiagnosticEngine &diag) = 0;
};

#define MIST_PASS(Arg, Factory, Description) std::unique_ptr<Pass> Factory();
#include "passes/Passes.def"

struct PassInfo {
  const char *argument;
  const char *description;
  std::unique_ptr<Pass> (*create)();
  bool inDefaultPipeline = true;
};
llvm::ArrayRef<PassInfo> registeredPasses();
const PassInfo *lookupPass(llvm::StringRef argument);

struct PassManagerOptions {
  std::set<std::string> printAfter; ///< pass arguments
  bool printAfterAll = false;
  bool verifyEach = false;
  bool timePasses = false;
};

class PassManager {
public:
  PassManager(PassManagerOptions opts, llvm::raw_ostream &dumpStream)
      : opts(std::move(opts)), dumps(dumpStream) {}
  void add(std::unique_ptr<Pass> p) { passes.push_back(std::move(p)); }
  /// Runs the passes in order; stops at the first failure.
  LogicalResult run(Module &m, DiagnosticEngine &diag);

private:
  PassManagerOptions opts;
  llvm::raw_ostream &dumps;
  std::vector<std::unique_ptr<Pass>> passes;
};

} // namespace mist
