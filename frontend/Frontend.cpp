//===- Frontend.cpp - Source text to IR in one call -----------------------===//
#include "frontend/Frontend.h"

#include "ir/Verifier.h"
#include "passes/Pass.h"

using namespace mist;

std::unique_ptr<Module> mist::compileMist(unsigned bufferId, const FrontendOptions &opts,
                                          DiagnosticEngine &diag) {
  auto program = loadProgram(bufferId, opts.load, diag);
  if (!program || failed(checkProgram(*program, diag)))
    return nullptr;
  return generateIR(*program, opts.gen, diag);
}

bool mist::runPipeline(Module &m, const std::vector<std::string> &passes, DiagnosticEngine &diag) {
  PassManager pm(PassManagerOptions{}, llvm::errs());
  std::vector<std::string> names = passes;
  if (names.empty())
    for (const PassInfo &p : registeredPasses())
      names.push_back(p.argument);
  for (const std::string &n : names) {
    const PassInfo *info = lookupPass(n);
    if (!info) {
      diag.error({}, "unknown pass '" + n + "'");
      return false;
    }
    pm.add(info->create());
  }
  return succeeded(pm.run(m, diag)) && succeeded(verifyModule(m, diag));
}
