//===- OutputFile.h - Writing an output file whole, or not at all ---------===//
/// \file
/// Every file mistc writes goes through here. A regular file (or a new one)
/// is written to a temporary file beside it and renamed over it only when
/// everything was written, so a failed write (a full disk, a read-only
/// folder) leaves the old file, or none, never a partial or empty one. A
/// path that is not a regular file (/dev/null, /dev/stdout, a FIFO) is
/// written in place. Standard output ("-") is flushed and checked. Failures
/// are errors naming the file and the reason; nothing aborts, and the
/// caller says "written" only after `commit` succeeded.
//===----------------------------------------------------------------------===//
#pragma once

#include "support/Diagnostics.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>

namespace mist {

class OutputFile {
public:
  /// Opens `path` ("-": standard output) for writing; `what` names it in
  /// messages ("plan", "train.cu"). `failed()` says whether it could not.
  OutputFile(std::string path, std::string what, DiagnosticEngine &diag);
  /// Discards the temporary file unless committed.
  ~OutputFile();
  OutputFile(const OutputFile &) = delete;
  OutputFile &operator=(const OutputFile &) = delete;

  bool failed() const { return !stream; }
  llvm::raw_ostream &os() { return *stream; }
  /// Flushes, checks, and puts the file in place; false after reporting.
  bool commit();

private:
  /// Reports a write error of the stream and clears it, so that its
  /// destructor does not abort.
  bool checkStream(llvm::raw_fd_ostream &s);

  std::string path, what, temporary;
  DiagnosticEngine &diag;
  std::unique_ptr<llvm::raw_fd_ostream> file; ///< the temporary file, or the path in place
  llvm::raw_ostream *stream = nullptr;
  bool committed = false;
};

/// Checks standard output at the end of a command: a write error (a full
/// disk, a closed pipe) is reported and cleared; false then.
bool checkStandardOutput(DiagnosticEngine &diag);

} // namespace mist
