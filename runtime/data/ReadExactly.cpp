//===- ReadExactly.cpp - Whole reads at an offset -------------------------===//
#include "runtime/data/ReadExactly.h"

#include <cerrno>
#include <cstring>
#include <unistd.h>

namespace mist::rt {

bool readExactly(int fd, unsigned char *out, size_t n, off_t offset) {
  while (n > 0) {
    ssize_t got = ::pread(fd, out, n, offset);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0) {
      if (got == 0)
        errno = 0;
      return false;
    }
    out += got, n -= size_t(got), offset += got;
  }
  return true;
}

std::string readFailure() {
  return errno == 0 ? std::string("the file ended early") : std::string(std::strerror(errno));
}

} // namespace mist::rt
