//===- Pipeline.cpp - The one definition of mistc's pass pipeline ---------===//
#include "passes/Pipeline.h"

#include "ir/Verifier.h"
#include "llvm/Support/raw_ostream.h"

#include <string_view>

using namespace mist;

bool mist::buildPipeline(PassManager &pm, const Module &m, const PipelineRequest &request,
                         DiagnosticEngine &diag) {
  std::vector<std::string> names;
  if (request.passes) {
    if (request.fromIR && m.state.shaped)
      names.push_back("shape-infer"); // re-check parsed types before other passes
    for (const std::string &p : *request.passes)
      if (!p.empty())
        names.push_back(p);
  } else {
    for (const PassInfo &p : registeredPasses())
      if (p.inDefaultPipeline &&
          (request.withCosts || std::string_view(p.argument) != "cost-model"))
        names.push_back(p.argument);
  }
  for (const std::string &n : names) {
    const PassInfo *info = lookupPass(n);
    if (!info) {
      diag.error({}, "unknown pass '" + n + "' (see --list-passes)");
      return false;
    }
    auto pass = info->create();
    // shape-infer always runs: on parsed IR it re-checks the types.
    if (!request.passes && n != "shape-infer" && pass->alreadyApplied(m))
      continue;
    pm.add(std::move(pass));
  }
  return true;
}

bool mist::applySequenceParallel(Module &m, DiagnosticEngine &diag) {
  if (m.state.sequenceSplit)
    return true;
  if (!m.state.shaped || !m.state.tpSharded) {
    diag.error({}, "sequence parallelism needs a shaped, tp-sharded module");
    return false;
  }
  m.dropBackward();
  return runPipeline(m, {"sequence-parallel", "backward"}, diag);
}

bool mist::runPipeline(Module &m, const std::vector<std::string> &passes, DiagnosticEngine &diag) {
  PassManager pm(PassManagerOptions{}, llvm::errs());
  PipelineRequest request;
  if (!passes.empty())
    request.passes = passes;
  return buildPipeline(pm, m, request, diag) && succeeded(pm.run(m, diag)) &&
         succeeded(verifyModule(m, diag));
}
