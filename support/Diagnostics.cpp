//===- Diagnostics.cpp - Located error reporting --------------------------===//
#include "support/Diagnostics.h"

using namespace mist;

void DiagnosticEngine::print(llvm::SMLoc loc, llvm::SourceMgr::DiagKind kind,
                             const llvm::Twine &msg, llvm::ArrayRef<llvm::SMRange> ranges) {
  if (loc.isValid()) {
    srcMgr.PrintMessage(*os, loc, kind, msg, ranges);
    return;
  }
  // Errors without a source position (command line, internal limits).
  const char *label = kind == llvm::SourceMgr::DK_Error     ? "error"
                      : kind == llvm::SourceMgr::DK_Warning ? "warning"
                                                            : "note";
  *os << "mistc: " << label << ": " << msg << "\n";
}

void DiagnosticEngine::error(llvm::SMLoc loc, const llvm::Twine &msg,
                             llvm::ArrayRef<llvm::SMRange> ranges) {
  ++numErrors;
  print(loc, llvm::SourceMgr::DK_Error, msg, ranges);
}

void DiagnosticEngine::warning(llvm::SMLoc loc, const llvm::Twine &msg) {
  print(loc, llvm::SourceMgr::DK_Warning, msg, {});
}

void DiagnosticEngine::note(llvm::SMLoc loc, const llvm::Twine &msg) {
  print(loc, llvm::SourceMgr::DK_Note, msg, {});
}
