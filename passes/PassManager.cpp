//===- PassManager.cpp - Runs passes with printing, verifying, timing -----===//
#include "passes/Pass.h"

#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "llvm/Support/Format.h"
#include <chrono>

using namespace mist;

Pass::~Pass() = default;

llvm::ArrayRef<PassInfo> mist::registeredPasses() {
  static const PassInfo infos[] = {
#define MIST_PASS(Arg, Factory, Description) {Arg, Description, &Factory, true},
#define MIST_OPTIONAL_PASS(Arg, Factory, Description) {Arg, Description, &Factory, false},
#include "passes/Passes.def"
  };
  return infos;
}

const PassInfo *mist::lookupPass(llvm::StringRef argument) {
  for (const PassInfo &p : registeredPasses())
    if (argument == p.argument)
      return &p;
  return nullptr;
}

LogicalResult PassManager::run(Module &m, DiagnosticEngine &diag) {
  // A pass's error inside a template (shape checks of the stdlib's ops) is
  // reported at the model instance that instantiated it.
  DiagnosticEngine::InstanceScope scope(diag, {m.instanceRange.Start, m.instanceRange, m.name});
  struct Timing {
    std::string name;
    double ms;
  };
  std::vector<Timing> timings;
  LogicalResult result = success();
  for (auto &p : passes) {
    auto start = std::chrono::steady_clock::now();
    if (failed(p->run(m, diag))) {
      result = failure();
      break;
    }
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    timings.push_back({p->argument().str(), ms});
    if (opts.verifyEach && failed(verifyModule(m, diag))) {
      diag.error({}, "module failed verification after pass '" + p->argument() + "'");
      result = failure();
      break;
    }
    if (opts.printAfterAll || opts.printAfter.count(p->argument().str())) {
      dumps << "// -----// IR Dump After " << p->argument() << " //----- //\n";
      printModule(m, dumps);
      dumps << "\n";
    }
  }
  if (opts.timePasses) {
    double total = 0;
    for (auto &t : timings)
      total += t.ms;
    llvm::errs() << "===-------------------------------------------------------------------===\n"
                 << "                        mistc pass execution timing\n"
                 << "===-------------------------------------------------------------------===\n";
    for (auto &t : timings)
      llvm::errs() << llvm::format("  %10.3f ms  %s\n", t.ms, t.name.c_str());
    llvm::errs() << llvm::format("  %10.3f ms  total\n", total);
  }
  return result;
}
