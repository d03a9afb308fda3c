//===- MemFile.h - A fuzzer input as a file the runtime can open by path --===//
/// \file
/// The runtime's readers take a path (safetensors files, token files) and
/// read with pread, as they must for files of many GiB. A fuzz target gives
/// them its input through one anonymous in-memory file (memfd_create), made
/// once per process and rewritten for every input, opened through
/// /proc/self/fd/N: a regular file to fstat, no disk traffic, nothing left
/// behind. Linux only, as the runtime's readers are.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/mman.h>
#include <unistd.h>

namespace mist::fuzz {

class MemFile {
public:
  explicit MemFile(const char *name) {
    fd = ::memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) {
      std::perror("memfd_create");
      std::abort();
    }
    filePath = "/proc/self/fd/" + std::to_string(fd);
  }
  ~MemFile() { ::close(fd); }
  MemFile(const MemFile &) = delete;
  MemFile &operator=(const MemFile &) = delete;

  /// Replaces the file's contents with `data`.
  void assign(const uint8_t *data, size_t size) {
    if (::ftruncate(fd, 0) != 0)
      std::abort();
    size_t done = 0;
    while (done < size) {
      ssize_t put = ::pwrite(fd, data + done, size - done, off_t(done));
      if (put <= 0)
        std::abort();
      done += size_t(put);
    }
  }

  const std::string &path() const { return filePath; }

private:
  int fd = -1;
  std::string filePath;
};

} // namespace mist::fuzz
