//===- StagedFolder.cpp - Output folders that appear whole or not at all ---===//
#include "backend/exports/StagedFolder.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include <fmt/format.h>

namespace mist {

/// A folder beside `dir` (same filesystem, so its files can be renamed in).
bool stageFolder(const std::string &dir, std::string &staging, DiagnosticEngine &diag) {
  llvm::SmallString<256> parent(dir);
  llvm::sys::path::remove_filename(parent);
  if (parent.empty())
    parent = ".";
  if (std::error_code ec = llvm::sys::fs::create_directories(parent)) {
    diag.error({}, fmt::format("cannot create the folder '{}': {}", parent.str(), ec.message()));
    return false;
  }
  llvm::SmallString<256> made;
  if (std::error_code ec = llvm::sys::fs::createUniqueDirectory(dir + ".tmp", made)) {
    diag.error({}, fmt::format("cannot write the folder '{}': {}", dir, ec.message()));
    return false;
  }
  staging = std::string(made);
  return true;
}

StagingCleanup::~StagingCleanup() { llvm::sys::fs::remove_directories(folder); }

/// Moves the staged files into `dir`: the whole folder when `dir` does not
/// exist yet, else file by file, the weights before the config that
/// describes them.
bool moveStagedFiles(const std::string &staging, const std::string &dir,
                     const std::vector<std::string> &files, DiagnosticEngine &diag) {
  if (!llvm::sys::fs::exists(dir)) {
    if (std::error_code ec = llvm::sys::fs::rename(staging, dir)) {
      diag.error({}, fmt::format("cannot write the folder '{}': {}", dir, ec.message()));
      return false;
    }
    return true;
  }
  if (!llvm::sys::fs::is_directory(dir)) {
    diag.error({}, fmt::format("cannot write the folder '{}': a file of that name is there", dir));
    return false;
  }
  for (const std::string &f : files)
    if (std::error_code ec = llvm::sys::fs::rename(staging + "/" + f, dir + "/" + f)) {
      diag.error({}, fmt::format("cannot write '{}/{}': {}", dir, f, ec.message()));
      return false;
    }
  return true;
}

} // namespace mist
