//===- Sema.h - Loading, name resolution and call checking ----------------===//
/// \file
/// Loads a .mist file and its imports into a Program, then checks what can
/// be checked without evaluating sizes: unique declaration names, every
/// variable defined before use, every call naming a block or a built-in with
/// the right arguments, well-formed sections and train settings. IRGen then
/// evaluates the chosen model instance.
//===----------------------------------------------------------------------===//
#pragma once

#include "frontend/AST.h"
#include "support/Diagnostics.h"
#include "support/LogicalResult.h"
#include <map>

namespace mist {

struct Program {
  std::vector<std::unique_ptr<FileAST>> files; ///< files[0] is the main file
  std::map<std::string, const BlockDecl *> blocks;
  std::map<std::string, const ModelDecl *> models;
  std::map<std::string, const InstanceDecl *> instances;
  const TrainDecl *train = nullptr; ///< the main file's train section
};

struct LoadOptions {
  std::vector<std::string> importDirs; ///< searched after the importing file's folder
  bool allowImports = true;            ///< the fuzzer turns file access off
};

/// Parses the buffer and, recursively, its imports.
std::unique_ptr<Program> loadProgram(unsigned mainBuffer, const LoadOptions &opts,
                                     DiagnosticEngine &diag);

/// Declaration-level checks over the whole program; `opts` says where an
/// import would find an unknown template (for the hint).
LogicalResult checkProgram(Program &program, const LoadOptions &opts, DiagnosticEngine &diag);

} // namespace mist
