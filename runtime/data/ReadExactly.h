//===- ReadExactly.h - Whole reads at an offset ---------------------------===//
/// \file
/// The data readers read what a batch needs with pread (no mapping: a file
/// that shrinks while training then reports an error instead of ending the
/// job with SIGBUS). pread may return less than asked; this loops.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <string>
#include <sys/types.h>

namespace mist::rt {

/// Reads exactly `n` bytes at `offset` of `fd`; false otherwise, with errno
/// set (0 when the file ended first).
bool readExactly(int fd, unsigned char *out, size_t n, off_t offset);

/// strerror(errno), or "the file ended early" when errno is 0 (a short read).
std::string readFailure();

} // namespace mist::rt
