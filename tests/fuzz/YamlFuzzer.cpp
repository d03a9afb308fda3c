//===- YamlFuzzer.cpp - libFuzzer target for cluster and plan files -------===//
/// \file
/// Feeds arbitrary bytes to the cluster loader and the plan loader (the
/// first byte picks which reads first; both always run). A plan that loads
/// must survive writePlan -> loadPlan unchanged: a mismatch traps, so the
/// fuzzer reports it like a crash. Diagnostics go to llvm::nulls(). Built
/// only with -DMIST_FUZZ=ON (docs/fuzzing.md).
//===----------------------------------------------------------------------===//
#include "yaml/ClusterLoader.h"
#include "yaml/PlanLoader.h"
#include "yaml/PlanWriter.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include <cstddef>
#include <cstdint>
#include <string>

using namespace mist;

namespace {

void tryCluster(llvm::StringRef text) {
  llvm::SourceMgr srcMgr;
  DiagnosticEngine diag(srcMgr, llvm::nulls());
  unsigned id = srcMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, "fuzz.yaml"),
                                          llvm::SMLoc());
  if (auto c = loadCluster(id, diag))
    for (int nodes = 1; nodes <= c->nodes; nodes *= 2)
      (void)collectiveFigures(*c, nodes, c->gpusPerNode);
}

void tryPlan(llvm::StringRef text) {
  llvm::SourceMgr srcMgr;
  DiagnosticEngine diag(srcMgr, llvm::nulls());
  unsigned id = srcMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, "fuzz.yaml"),
                                          llvm::SMLoc());
  auto plan = loadPlan(id, diag);
  if (!plan)
    return;
  std::string written;
  llvm::raw_string_ostream os(written);
  writePlan(*plan, os);
  os.flush();
  unsigned again = srcMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(written, "again.yaml"), llvm::SMLoc());
  auto reread = loadPlan(again, diag);
  if (!reread || !(*reread == *plan))
    __builtin_trap(); // the writer and the loader disagree
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  if (size > 0 && (data[0] & 1)) {
    tryPlan(text);
    tryCluster(text);
  } else {
    tryCluster(text);
    tryPlan(text);
  }
  return 0;
}
