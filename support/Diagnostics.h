//===- Diagnostics.h - Located error reporting ----------------------------===//
/// \file
/// Every user-facing error goes through DiagnosticEngine, which prints it with
/// llvm::SourceMgr: `file:line:col: error: msg`, the source line and a caret
/// or range. Messages follow the LLVM style: lower-case, no final period.
/// Like clang's -ferror-limit, only the first `errorLimit` errors print (a
/// broken input must not flood the terminal), and a source line longer
/// than `maxEchoedColumns` is echoed as a window around the caret.
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/Support/SMLoc.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include <optional>
#include <string>

namespace mist {

class DiagnosticEngine {
public:
  DiagnosticEngine(llvm::SourceMgr &srcMgr, llvm::raw_ostream &os) : srcMgr(srcMgr), os(&os) {}

  void error(llvm::SMLoc loc, const llvm::Twine &msg, llvm::ArrayRef<llvm::SMRange> ranges = {});
  void warning(llvm::SMLoc loc, const llvm::Twine &msg);
  void note(llvm::SMLoc loc, const llvm::Twine &msg, llvm::ArrayRef<llvm::SMRange> ranges = {});

  /// Errors printed before the rest are only counted; 0: no limit.
  void setErrorLimit(unsigned limit) { errorLimit = limit; }
  static constexpr unsigned defaultErrorLimit = 20;
  static constexpr size_t maxEchoedColumns = 160;

  unsigned errorCount() const { return numErrors; }
  bool hasErrors() const { return numErrors != 0; }
  /// Redirects output, e.g. to llvm::nulls() in the fuzzer.
  void setStream(llvm::raw_ostream &stream) { os = &stream; }
  llvm::SourceMgr &sourceMgr() { return srcMgr; }

  /// The model instance being compiled: while one is set, an error located
  /// in another file (inside a template an import defines, such as the
  /// stdlib's llama) is the instance's fault, so it is reported at the
  /// instance ("in model 'm': ...") with a note where the template checks it.
  struct Instance {
    llvm::SMLoc at;
    llvm::SMRange range;
    std::string name;
  };
  /// Sets the instance for its lifetime (and restores the previous one).
  class InstanceScope {
  public:
    InstanceScope(DiagnosticEngine &d, Instance instance) : diag(d), saved(d.instance) {
      d.instance = std::move(instance);
    }
    ~InstanceScope() { diag.instance = std::move(saved); }
    InstanceScope(const InstanceScope &) = delete;
    InstanceScope &operator=(const InstanceScope &) = delete;

  private:
    DiagnosticEngine &diag;
    std::optional<Instance> saved;
  };

private:
  void print(llvm::SMLoc loc, llvm::SourceMgr::DiagKind kind, const llvm::Twine &msg,
             llvm::ArrayRef<llvm::SMRange> ranges);

  llvm::SourceMgr &srcMgr;
  llvm::raw_ostream *os;
  unsigned numErrors = 0;
  unsigned errorLimit = defaultErrorLimit;
  std::optional<Instance> instance;
};

} // namespace mist
