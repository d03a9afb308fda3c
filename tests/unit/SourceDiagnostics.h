//===- SourceDiagnostics.h - Source buffers and diagnostics in unit tests -===//
/// What the compiler and the file loaders report into: a source manager and
/// the diagnostics printed. Each test derives a struct holding what it built
/// or loaded (a module, a cluster, a plan), which may refer to the buffers.
//===----------------------------------------------------------------------===//
#pragma once

#include "support/Diagnostics.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mist::test {

struct SourceDiagnostics {
  llvm::SourceMgr srcMgr;
  std::string diagText;
  llvm::raw_string_ostream diagStream{diagText};
  DiagnosticEngine diag{srcMgr, diagStream};

  const std::string &errors() { return diagStream.str(); }
  /// `text` as a source buffer named `name`: the id a loader takes.
  unsigned addBuffer(const std::string &text, const std::string &name) {
    return srcMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text, name),
                                     llvm::SMLoc());
  }
};

} // namespace mist::test
