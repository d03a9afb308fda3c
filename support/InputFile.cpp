//===- InputFile.cpp - Reading an input file whole, bounded ----------------===//
#include "support/InputFile.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Process.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

using namespace mist;

namespace {

std::string mebibytes(size_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

/// A pipe (standard input, a FIFO, a shell's <(...)) in chunks, stopping
/// one byte past the limit; `source` names it in messages, `name` in
/// diagnostics' locations.
std::unique_ptr<llvm::MemoryBuffer> readStream(int fd, const InputKind &kind,
                                               const std::string &source, const std::string &name,
                                               std::string &error) {
  std::string text;
  char chunk[1 << 16];
  while (true) {
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      error = std::string("cannot read the ") + kind.what + " from " + source + ": " +
              std::strerror(errno);
      return nullptr;
    }
    if (n == 0)
      break;
    text.append(chunk, size_t(n));
    if (text.size() > kind.maxBytes) {
      error = std::string("the ") + kind.what + " from " + source + " is larger than " +
              mebibytes(kind.maxBytes) + ", the most mistc reads";
      return nullptr;
    }
  }
  return llvm::MemoryBuffer::getMemBufferCopy(text, name);
}

/// A FIFO or pipe by path: opened without waiting for a writer (a FIFO
/// nobody writes reads as empty, where open() would block for ever), then
/// read as a stream.
std::unique_ptr<llvm::MemoryBuffer> readPipe(const std::string &path, const InputKind &kind,
                                             std::string &error) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    error = std::string("cannot read ") + kind.what + " '" + path + "': " + std::strerror(errno);
    return nullptr;
  }
  // Blocking reads from here: a writer that is there delivers all it writes.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  std::unique_ptr<llvm::MemoryBuffer> buffer = readStream(fd, kind, "'" + path + "'", path, error);
  ::close(fd);
  return buffer;
}

} // namespace

std::unique_ptr<llvm::MemoryBuffer> mist::readInputFile(llvm::StringRef path, const InputKind &kind,
                                                        std::string &error, bool allowStdin) {
  const std::string quoted = "'" + path.str() + "'";
  if (path == "-" && allowStdin)
    return readStream(STDIN_FILENO, kind, "standard input", "<stdin>", error);
  llvm::sys::fs::file_status status;
  // stat, not open: opening a FIFO would block until a writer comes.
  if (std::error_code ec = llvm::sys::fs::status(path, status)) {
    error = std::string("cannot read ") + kind.what + " " + quoted + ": " + ec.message();
    return nullptr;
  }
  const llvm::sys::fs::file_type type = status.type();
  if (type == llvm::sys::fs::file_type::directory_file) {
    error = std::string("cannot read ") + kind.what + " " + quoted + ": it is a directory";
    return nullptr;
  }
  if (type == llvm::sys::fs::file_type::fifo_file)
    return readPipe(path.str(), kind, error);
  if (type != llvm::sys::fs::file_type::regular_file) {
    error = std::string("cannot read ") + kind.what + " " + quoted +
            ": it is a device or socket, not a file";
    return nullptr;
  }
  if (status.getSize() > kind.maxBytes) {
    error = std::string("cannot read ") + kind.what + " " + quoted + ": it is " +
            std::to_string(status.getSize()) + " bytes, more than " + mebibytes(kind.maxBytes) +
            ", the most mistc reads";
    return nullptr;
  }
  // A regular file whose size stat does not tell (/proc) is read up to the
  // limit by the size it turns out to have.
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true,
                                            /*RequiresNullTerminator=*/true);
  if (!buffer) {
    error =
        std::string("cannot read ") + kind.what + " " + quoted + ": " + buffer.getError().message();
    return nullptr;
  }
  if ((*buffer)->getBufferSize() > kind.maxBytes) {
    error = std::string("cannot read ") + kind.what + " " + quoted + ": more than " +
            mebibytes(kind.maxBytes) + ", the most mistc reads";
    return nullptr;
  }
  return std::move(*buffer);
}
