//===- MistYamlCheck.cpp - Load a cluster or plan file and dump it --------===//
/// \file
/// A developer tool for the lit tests of the YAML loaders:
///   mist-yaml-check --cluster NAME|FILE [--nodes N]
///   mist-yaml-check --plan FILE
/// prints the loaded file in canonical form (every key, fixed order, shortest
/// round-trip reals; the output loads back to the same value) or the located
/// errors, and exits with 1 on errors.
//===----------------------------------------------------------------------===//
#include "format/ClusterWriter.h"
#include "ir/Printer.h"
#include "support/InputFile.h"
#include "support/OutputFile.h"
#include "yaml/ClusterLoader.h"
#include "yaml/PlanLoader.h"
#include "yaml/PlanWriter.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"

#include <sstream>

#ifndef MIST_CLUSTER_DIR
#define MIST_CLUSTER_DIR ""
#endif

using namespace mist;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory category("mist-yaml-check options");
cl::opt<std::string> clusterArg("cluster", cl::desc("cluster preset name or YAML file"),
                                cl::value_desc("name|file"), cl::cat(category));
cl::opt<int> nodesArg("nodes", cl::desc("override the cluster's node count"), cl::init(0),
                      cl::cat(category));
cl::opt<std::string> planArg("plan", cl::desc("plan YAML file"), cl::value_desc("file"),
                             cl::cat(category));

int run() {
  llvm::SourceMgr srcMgr;
  DiagnosticEngine diag(srcMgr, llvm::errs());
  if (clusterArg.empty() == planArg.empty()) {
    diag.error({}, "give exactly one of --cluster and --plan");
    return 1;
  }
  if (!clusterArg.empty()) {
    std::vector<std::string> presetDirs = {MIST_CLUSTER_DIR};
    auto c = loadClusterByName(clusterArg, nodesArg, presetDirs, diag);
    if (!c)
      return 1;
    std::ostringstream text;
    writeClusterYaml(*c, {}, text); // the one cluster writer (format/ClusterWriter)
    llvm::outs() << text.str();
    return checkStandardOutput(diag) ? 0 : 1;
  }
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> buf = readInputFile(planArg, planInput, error);
  if (!buf) {
    diag.error({}, error);
    return 1;
  }
  unsigned id = srcMgr.AddNewSourceBuffer(std::move(buf), llvm::SMLoc());
  auto plan = loadPlan(id, diag);
  if (!plan)
    return 1;
  writePlan(*plan, llvm::outs());
  return checkStandardOutput(diag) ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  if (!cl::ParseCommandLineOptions(argc, argv, "mist-yaml-check: load a cluster or plan file\n"))
    return 1;
  return run();
}
