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

/// A path for the file a round trip writes (the writers take a path and
/// rename into place), in a folder of its own made on construction under
/// /dev/shm (else $TMPDIR or /tmp); the file and the folder are removed on
/// destruction. Keep one per process (a function-local static).
class ScratchFile {
public:
  ScratchFile(const char *folderPrefix, const char *fileName) {
    std::string base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "";
    if (base.empty()) {
      const char *tmp = std::getenv("TMPDIR");
      base = tmp && *tmp ? tmp : "/tmp";
    }
    folder = base + "/" + folderPrefix + "-XXXXXX";
    if (!::mkdtemp(folder.data()))
      std::abort();
    filePath = folder + "/" + fileName;
  }
  ~ScratchFile() {
    static_cast<void>(::unlink(filePath.c_str()));
    static_cast<void>(::rmdir(folder.c_str()));
  }
  ScratchFile(const ScratchFile &) = delete;
  ScratchFile &operator=(const ScratchFile &) = delete;

  const std::string &path() const { return filePath; }

private:
  std::string folder, filePath;
};

} // namespace mist::fuzz
