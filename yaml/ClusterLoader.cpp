//===- ClusterLoader.cpp - Read a cluster description ---------------------===//
#include "yaml/ClusterLoader.h"

#include "yaml/HostCluster.h"

#include "format/ClosestMatch.h"
#include "format/ClusterReader.h"
#include "ir/IR.h"
#include "support/InputFile.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include <set>
#include <string_view>

using namespace mist;

namespace {

bool looksLikePath(llvm::StringRef s) {
  return namesClusterFile(std::string_view(s.data(), s.size())) ||
         llvm::sys::fs::is_regular_file(s);
}

} // namespace

std::optional<Cluster> mist::loadCluster(unsigned bufferId, DiagnosticEngine &diag,
                                         int nodesOverride) {
  llvm::SourceMgr &sm = diag.sourceMgr();
  const llvm::MemoryBuffer *buffer = sm.getMemoryBuffer(bufferId);
  ClusterReadOptions options;
  options.nodesOverride = nodesOverride;
  options.knownOp = [](std::string_view name) {
    return parseOpName(llvm::StringRef(name.data(), name.size())).has_value();
  };
  std::vector<TextProblem> problems;
  std::optional<Cluster> c = readCluster(buffer->getBuffer().str(), options, problems);
  for (const TextProblem &p : problems) {
    llvm::SMLoc at;
    if (p.line > 0) {
      at = sm.FindLocForLineAndColumn(bufferId, unsigned(p.line), unsigned(p.column));
      if (!at.isValid())
        at = llvm::SMLoc::getFromPointer(buffer->getBufferStart());
    }
    diag.error(at, p.message);
  }
  return c;
}

std::vector<std::string> mist::listClusterPresets(llvm::ArrayRef<std::string> presetDirs) {
  std::set<std::string> names;
  for (const std::string &dir : presetDirs) {
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      llvm::StringRef file = llvm::sys::path::filename(it->path());
      if (file.endswith(".yaml"))
        names.insert(file.drop_back(5).str());
    }
  }
  return {names.begin(), names.end()};
}

std::optional<Cluster> mist::loadClusterByName(llvm::StringRef nameOrPath, int nodesOverride,
                                               llvm::ArrayRef<std::string> presetDirs,
                                               DiagnosticEngine &diag) {
  if (nameOrPath.empty()) {
    diag.error({}, "no cluster given (a preset name or a YAML file)");
    return std::nullopt;
  }
  std::string path;
  if (looksLikePath(nameOrPath)) {
    path = nameOrPath.str();
  } else {
    for (const std::string &dir : presetDirs) {
      llvm::SmallString<256> p(dir);
      llvm::sys::path::append(p, nameOrPath + ".yaml");
      if (llvm::sys::fs::is_regular_file(p)) {
        path = std::string(p);
        break;
      }
    }
    if (path.empty()) {
      std::vector<std::string> presets = listClusterPresets(presetDirs);
      std::string msg = "unknown cluster preset '" + nameOrPath.str() + "'";
      std::vector<std::string_view> names(presets.begin(), presets.end());
      if (auto close = closestMatch(std::string_view(nameOrPath.data(), nameOrPath.size()), names))
        msg += "; did you mean '" + *close + "'?";
      if (!presets.empty()) {
        msg += " (presets:";
        for (const std::string &p : presets)
          msg += " " + p;
        msg += ")";
      }
      diag.error({}, msg);
      return std::nullopt;
    }
  }
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> buf = readInputFile(path, clusterInput, error);
  if (!buf) {
    diag.error({}, error);
    return std::nullopt;
  }
  unsigned id = diag.sourceMgr().AddNewSourceBuffer(std::move(buf), llvm::SMLoc());
  std::optional<Cluster> c = loadCluster(id, diag, nodesOverride);
  if (c && !looksLikePath(nameOrPath) && nameOrPath == hostClusterName)
    fitHostCluster(*c); // this machine's cores and memory
  return c;
}
