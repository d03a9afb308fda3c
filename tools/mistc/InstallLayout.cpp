//===- InstallLayout.cpp - Where mistc finds what it ships ----------------===//
#include "tools/mistc/InstallLayout.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

// The build's own places, from tools/mistc/CMakeLists.txt.
#ifndef MIST_STDLIB_DIR
#define MIST_STDLIB_DIR ""
#endif
#ifndef MIST_CLUSTER_DIR
#define MIST_CLUSTER_DIR ""
#endif
#ifndef MIST_SOURCE_DIR
#define MIST_SOURCE_DIR "."
#endif
#ifndef MIST_TRAINER_LIB_FILES // the runtime's libraries in link order, space-separated
#define MIST_TRAINER_LIB_FILES ""
#endif
#ifndef MIST_TRAINER_LIB_NAMES // the same libraries' file names
#define MIST_TRAINER_LIB_NAMES ""
#endif
#ifndef MIST_CPU_KERNELS_LINK
#define MIST_CPU_KERNELS_LINK ""
#endif

using namespace mist;

namespace {

/// `base/a[/b]` (an empty part would leave a trailing separator).
std::string joined(llvm::StringRef base, llvm::StringRef a, llvm::StringRef b = "") {
  llvm::SmallString<256> p(base);
  llvm::sys::path::append(p, a);
  if (!b.empty())
    llvm::sys::path::append(p, b);
  return std::string(p);
}

/// `-Iinclude lib lib ... kernels`: the libraries' paths each under `libDir`
/// when one is given (installed), else as listed (the build tree's).
std::string buildFlags(const std::string &include, const std::string &libDir) {
  std::string flags = "-I" + include;
  llvm::SmallVector<llvm::StringRef, 16> libs;
  llvm::StringRef(libDir.empty() ? MIST_TRAINER_LIB_FILES : MIST_TRAINER_LIB_NAMES)
      .split(libs, ' ', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef lib : libs)
    flags += " " + (libDir.empty() ? lib.str() : joined(libDir, lib));
  if (!llvm::StringRef(MIST_CPU_KERNELS_LINK).empty())
    flags += std::string(" ") + MIST_CPU_KERNELS_LINK;
  return flags;
}

} // namespace

InstallLayout InstallLayout::locate(const std::string &executable) {
  InstallLayout l;
  const std::string prefix =
      llvm::sys::path::parent_path(llvm::sys::path::parent_path(executable)).str();
  const std::string share = joined(prefix, "share", "mist"), lib = joined(prefix, "lib", "mist");
  if (!prefix.empty() && llvm::sys::fs::is_directory(joined(share, "models")) &&
      llvm::sys::fs::exists(joined(lib, "libmistrtTrainer.a"))) {
    l.installed = true;
    l.stdlibDir = joined(share, "models");
    l.clusterDir = joined(share, "clusters");
    l.cpuTrainerBuildFlags = buildFlags(joined(prefix, "include", "mist"), lib);
    return l;
  }
  l.stdlibDir = MIST_STDLIB_DIR;
  l.clusterDir = MIST_CLUSTER_DIR;
  l.cpuTrainerBuildFlags = buildFlags(MIST_SOURCE_DIR, "");
  return l;
}
