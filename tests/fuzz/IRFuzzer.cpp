//===- IRFuzzer.cpp - libFuzzer target for the textual IR -----------------===//
/// \file
/// Feeds arbitrary bytes to parseIR and verifyModule and, when both succeed,
/// runs the pipeline `mistc -x ir` runs by default (passes/Pipeline.h
/// buildPipeline with no --passes and the default --emit=summary): shape-infer always first,
/// re-checking the parsed types of a shaped module, then tp-shard, backward
/// and cost-model unless the module's state says they were already applied;
/// then the verifier once more. Diagnostics go to llvm::nulls(); everything is
/// freed before returning. Built only with -DMIST_FUZZ=ON (docs/fuzzing.md).
//===----------------------------------------------------------------------===//
#include "ir/IRParser.h"
#include "ir/Verifier.h"
#include "passes/Pipeline.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include <cstddef>
#include <cstdint>

using namespace mist;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::SourceMgr srcMgr;
  DiagnosticEngine diag(srcMgr, llvm::nulls());
  diag.setStream(llvm::nulls());
  auto buf = llvm::MemoryBuffer::getMemBufferCopy(
      llvm::StringRef(reinterpret_cast<const char *>(data), size), "fuzz.mir");
  unsigned id = srcMgr.AddNewSourceBuffer(std::move(buf), llvm::SMLoc());

  std::unique_ptr<Module> m = parseIR(id, diag);
  if (!m || failed(verifyModule(*m, diag)) || diag.hasErrors())
    return 0;

  // The driver's pipeline for IR input, no --passes, --emit=summary.
  PassManager pm(PassManagerOptions{}, llvm::nulls());
  PipelineRequest request;
  request.fromIR = true;
  if (!buildPipeline(pm, *m, request, diag))
    __builtin_trap(); // the default pipeline names an unregistered pass
  if (succeeded(pm.run(*m, diag)))
    (void)verifyModule(*m, diag);
  return 0;
}
