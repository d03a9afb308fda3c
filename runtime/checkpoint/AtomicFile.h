//===- AtomicFile.h - Replace a file all at once or not at all ------------===//
/// \file
/// A checkpoint must never be half written at its path: a crash, a full disk
/// or a killed job while saving would otherwise destroy the last good one.
/// AtomicFileWriter writes to `<path>.tmp.<pid>` next to the target (same
/// file system, so the rename is atomic), and commit() flushes it to disk
/// (fsync), renames it over `<path>` and syncs the directory so the rename
/// itself survives a power loss. Until commit succeeds, `<path>` is
/// untouched; a writer destroyed without commit removes its temporary file.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mist::rt {

class AtomicFileWriter {
public:
  /// Creates the temporary file for `path`; nullopt with `error` (naming the
  /// temporary file and the system's reason) when it cannot.
  static std::optional<AtomicFileWriter> create(const std::string &path, std::string &error);

  AtomicFileWriter(AtomicFileWriter &&other) noexcept;
  AtomicFileWriter &operator=(AtomicFileWriter &&other) noexcept;
  AtomicFileWriter(const AtomicFileWriter &) = delete;
  AtomicFileWriter &operator=(const AtomicFileWriter &) = delete;
  ~AtomicFileWriter();

  /// Appends `n` bytes. Returns the error, or nullopt.
  std::optional<std::string> write(const void *data, size_t n);

  /// fsync, close, rename over the target, sync the directory. Returns the
  /// error (the target then still holds its old contents), or nullopt.
  std::optional<std::string> commit();

  const std::string &temporaryPath() const { return tempPath; }

private:
  AtomicFileWriter(std::string target, std::string temp, int fd)
      : targetPath(std::move(target)), tempPath(std::move(temp)), fd(fd) {}
  void discard();

  std::string targetPath;
  std::string tempPath;
  int fd = -1;
};

/// Removes the temporary files that writers for `path` killed before commit
/// or discard left behind (`<path>.tmp.<digits>`; a killed process cleans
/// nothing up). Call it only when no writer for `path` runs. Returns the
/// paths removed; `error` names a folder or file that could not be read or
/// removed (empty if none).
std::vector<std::string> removeInterruptedWrites(const std::string &path, std::string &error);

} // namespace mist::rt
