//===- MistFuzzer.cpp - libFuzzer target for .mist source -----------------===//
/// \file
/// Feeds arbitrary bytes to the whole front end (lexer, parser, imports,
/// Sema, IRGen) and, when that yields a module, to every registered pass and
/// the verifier. Diagnostics go to llvm::nulls(); each input gets its own
/// SourceMgr, DiagnosticEngine and Module, all freed before returning.
/// Built only with -DMIST_FUZZ=ON (see docs/fuzzing.md).
//===----------------------------------------------------------------------===//
#include "frontend/Frontend.h"
#include "passes/Pipeline.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include <cstddef>
#include <cstdint>

#ifndef MIST_STDLIB_DIR
#error "MIST_STDLIB_DIR must name the stdlib/models folder (set by tests/fuzz/CMakeLists.txt)"
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::SourceMgr srcMgr;
  mist::DiagnosticEngine diag(srcMgr, llvm::nulls());
  diag.setStream(llvm::nulls());
  // getMemBufferCopy null-terminates, as the lexer expects of file buffers.
  auto buf = llvm::MemoryBuffer::getMemBufferCopy(
      llvm::StringRef(reinterpret_cast<const char *>(data), size), "fuzz.mist");
  unsigned id = srcMgr.AddNewSourceBuffer(std::move(buf), llvm::SMLoc());

  mist::FrontendOptions opts;
  // `import "gpt"` resolves in the stdlib like mistc's default --stdlib; the
  // buffer's own folder is the current directory (no .mist files at the root).
  opts.load.importDirs = {MIST_STDLIB_DIR};
  if (std::unique_ptr<mist::Module> m = mist::compileMist(id, opts, diag))
    (void)mist::runPipeline(*m, /*passes=*/{}, diag); // empty: every registered pass
  return 0;
}
