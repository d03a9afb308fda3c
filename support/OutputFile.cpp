//===- OutputFile.cpp - Writing an output file whole, or not at all -------===//
#include "support/OutputFile.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace mist;

namespace {

/// Whether `path` names something that is not a regular file: written in
/// place (renaming over a device or a FIFO would replace it).
bool writtenInPlace(const std::string &path) {
  llvm::sys::fs::file_status status;
  if (llvm::sys::fs::status(path, status))
    return false; // nothing there yet: a new regular file
  return status.type() != llvm::sys::fs::file_type::regular_file;
}

} // namespace

OutputFile::OutputFile(std::string path_, std::string what_, DiagnosticEngine &diag)
    : path(std::move(path_)), what(std::move(what_)), diag(diag) {
  if (path == "-") {
    stream = &llvm::outs();
    return;
  }
  std::error_code ec;
  if (writtenInPlace(path)) {
    file = std::make_unique<llvm::raw_fd_ostream>(path, ec, llvm::sys::fs::OF_Text);
  } else {
    // Beside the target, so the rename stays on one filesystem.
    llvm::SmallString<256> model(path);
    model += ".tmp-%%%%%%";
    int fd = -1;
    llvm::SmallString<256> created;
    ec = llvm::sys::fs::createUniqueFile(model, fd, created, llvm::sys::fs::OF_Text);
    if (!ec) {
      temporary = std::string(created);
      file = std::make_unique<llvm::raw_fd_ostream>(fd, /*shouldClose=*/true);
    }
  }
  if (ec) {
    diag.error({}, "cannot write " + what + " '" + path + "': " + ec.message());
    file.reset();
    return;
  }
  stream = file.get();
}

OutputFile::~OutputFile() {
  if (file && file->has_error())
    file->clear_error();
  file.reset();
  if (!committed && !temporary.empty())
    llvm::sys::fs::remove(temporary);
}

bool OutputFile::checkStream(llvm::raw_fd_ostream &s) {
  s.flush();
  if (!s.has_error())
    return true;
  diag.error({}, (path == "-" ? "cannot write " + what + " to standard output"
                              : "cannot write " + what + " '" + path + "'") +
                     ": " + s.error().message());
  s.clear_error();
  return false;
}

bool OutputFile::commit() {
  if (!stream)
    return false;
  if (path == "-")
    return checkStream(llvm::outs());
  if (!checkStream(*file))
    return false;
  file->close();
  if (file->has_error()) { // close reports what the last write left
    diag.error({}, "cannot write " + what + " '" + path + "': " + file->error().message());
    file->clear_error();
    return false;
  }
  if (!temporary.empty()) {
    if (std::error_code ec = llvm::sys::fs::rename(temporary, path)) {
      diag.error({}, "cannot write " + what + " '" + path + "': " + ec.message());
      return false;
    }
  }
  committed = true;
  return true;
}

bool mist::checkStandardOutput(DiagnosticEngine &diag) {
  llvm::raw_fd_ostream &out = llvm::outs();
  out.flush();
  if (!out.has_error())
    return true;
  diag.error({}, "cannot write to standard output: " + out.error().message());
  out.clear_error();
  return false;
}
