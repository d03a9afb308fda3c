//===- StagedFolder.h - Output folders that appear whole or not at all -----===//
/// \file
/// mistc's folder outputs (--emit=hf, --emit=checkpoint) are written into a
/// staging folder beside the destination and moved in only when every file
/// is complete, so a full disk or a failed write leaves the destination as
/// it was.
//===----------------------------------------------------------------------===//
#pragma once

#include "support/Diagnostics.h"
#include <string>
#include <vector>

namespace mist {

/// Makes a unique staging folder beside `dir` (same filesystem, so its files
/// can be renamed in); false after reporting.
bool stageFolder(const std::string &dir, std::string &staging, DiagnosticEngine &diag);

/// Removes the staging folder and what is left in it.
struct StagingCleanup {
  std::string folder;
  ~StagingCleanup();
};

/// Moves the staged `files` into `dir`: the whole folder when `dir` does not
/// exist yet, else file by file in the order given; false after reporting.
bool moveStagedFiles(const std::string &staging, const std::string &dir,
                     const std::vector<std::string> &files, DiagnosticEngine &diag);

} // namespace mist
