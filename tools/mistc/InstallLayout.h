//===- InstallLayout.h - Where mistc finds what it ships ------------------===//
/// \file
/// mistc reads the standard model library (`import "gpt"`), the cluster
/// presets (`--cluster NAME`) and, for `--print-build-flags`, the trainer
/// runtime's headers and libraries. Run from the build tree it was built
/// in, they are the source and build trees'; installed (`cmake --install`,
/// docs/install.md) it finds them under its own prefix, next to the binary:
///   PREFIX/bin/mistc
///   PREFIX/share/mist/models, PREFIX/share/mist/clusters
///   PREFIX/include/mist, PREFIX/lib/mist/libmistrt*.a
/// so an installed mistc and the train.cu files it writes name no path of
/// the machine or tree it was built on.
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

namespace mist {

struct InstallLayout {
  bool installed = false;
  std::string stdlibDir;  ///< the standard model library
  std::string clusterDir; ///< the cluster presets
  /// What `mpicxx -std=c++20 -O2 -DMIST_CPU -x c++ train.cu -x none FLAGS`
  /// needs: the runtime's headers and libraries, and the CPU kernels' own.
  std::string cpuTrainerBuildFlags;

  /// The layout of the mistc at `executable` (its own path): installed when
  /// PREFIX/share/mist and PREFIX/lib/mist are beside its bin folder, else
  /// the trees it was built from.
  static InstallLayout locate(const std::string &executable);
};

} // namespace mist
