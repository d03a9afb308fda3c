//===- InputFile.h - Reading an input file whole, bounded ------------------===//
/// \file
/// Every file mistc reads whole (.mist sources and their imports, textual
/// IR, plan and cluster files) comes through here. A device or a directory
/// is refused before it is opened, so `--cluster /dev/zero` cannot read
/// until memory runs out; a FIFO or pipe (a shell's `<(...)`) is opened
/// without waiting for a writer, so `mistc FIFO.mist` cannot block in
/// open() (a FIFO nobody writes reads as empty); a regular file larger than
/// the kind's limit is refused by its size, and pipes and standard input
/// ("-") are read in chunks up to the limit, never past it.
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstddef>
#include <memory>
#include <string>

namespace mist {

/// What a file holds, for messages ("source file", "plan") and its limit.
struct InputKind {
  const char *what;
  size_t maxBytes;
};

/// The limits (README, "Limits"): far above any real file of the kind.
inline constexpr InputKind sourceInput{"source file", size_t(64) << 20};
inline constexpr InputKind planInput{"plan", size_t(64) << 20};
inline constexpr InputKind clusterInput{"cluster file", size_t(64) << 20};

/// Reads `path` ("-": standard input, where `allowStdin`) whole; null with
/// `error` set ("cannot read plan 'p.yaml': ...") otherwise.
std::unique_ptr<llvm::MemoryBuffer> readInputFile(llvm::StringRef path, const InputKind &kind,
                                                  std::string &error, bool allowStdin = false);

} // namespace mist
