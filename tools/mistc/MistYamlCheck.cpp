//===- MistYamlCheck.cpp - Load a cluster or plan file and dump it --------===//
/// \file
/// A developer tool for the lit tests of the YAML loaders:
///   mist-yaml-check --cluster NAME|FILE [--nodes N]
///   mist-yaml-check --plan FILE
/// prints the loaded file in canonical form (every key, fixed order, shortest
/// round-trip reals; the output loads back to the same value) or the located
/// errors, and exits with 1 on errors.
//===----------------------------------------------------------------------===//
#include "format/ClusterLoader.h"
#include "format/PlanLoader.h"
#include "format/PlanWriter.h"
#include "ir/Printer.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"

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

void writeCluster(const Cluster &c, llvm::raw_ostream &os) {
  const DeviceProfile &d = c.device;
  os << "mist_cluster: " << clusterFormatVersion << "\n";
  os << "name: " << yamlQuote(c.name) << "\n";
  os << "nodes: " << c.nodes << "\n";
  os << "gpus_per_node: " << c.gpusPerNode << "\n";
  os << "tp_across_nodes: " << (c.tpAcrossNodes ? "true" : "false") << "\n";
  os << "device:\n";
  os << "  name: " << yamlQuote(d.name) << "\n";
  os << "  memory_gib: " << formatReal(d.memoryGiB) << "\n";
  os << "  usable_fraction: " << formatReal(d.usableFraction) << "\n";
  os << "  peak_tflops: " << formatReal(d.peakTflops) << "\n";
  if (d.tf32PeakTflops > 0)
    os << "  tf32_peak_tflops: " << formatReal(d.tf32PeakTflops) << "\n";
  os << "  matmul_efficiency: " << formatReal(d.matmulEfficiency) << "\n";
  os << "  mem_bandwidth_gbs: " << formatReal(d.memBandwidthGBs) << "\n";
  os << "  mem_efficiency: " << formatReal(d.memEfficiency) << "\n";
  if (!d.measured.empty()) {
    os << "  measured:\n";
    for (const MeasuredOp &m : d.measured)
      os << "    - {op: " << yamlQuote(m.op) << ", shape: \"" << m.shape
         << "\", seconds: " << formatReal(m.seconds) << "}\n";
  }
  if (!c.collectives.empty()) {
    os << "collectives:\n";
    for (const CollectiveLink &l : c.collectives)
      os << "  - {nodes: " << l.nodes << ", gpus_per_node: " << l.gpusPerNode
         << ", bus_gbs: " << formatReal(l.busGBs) << ", latency_us: " << formatReal(l.latencyUs)
         << "}\n";
  }
  os << "p2p: {intra_gbs: " << formatReal(c.p2pIntraGBs)
     << ", inter_gbs: " << formatReal(c.p2pInterGBs)
     << ", latency_us: " << formatReal(c.p2pLatencyUs) << "}\n";
  os << "host: {h2d_gbs: " << formatReal(c.h2dGBs) << ", d2h_gbs: " << formatReal(c.d2hGBs)
     << ", latency_us: " << formatReal(c.hostLatencyUs);
  if (c.hostMemoryGiB > 0)
    os << ", memory_gib: " << formatReal(c.hostMemoryGiB);
  os << "}\n";
  if (!c.interference.empty()) {
    os << "interference:\n";
    for (const InterferenceEntry &e : c.interference) {
      os << "  - {streams: [";
      for (size_t i = 0; i < e.streams.size(); ++i)
        os << (i ? ", " : "") << streamName(e.streams[i]);
      os << "], factors: [";
      for (size_t i = 0; i < e.factors.size(); ++i)
        os << (i ? ", " : "") << formatReal(e.factors[i]);
      os << "]}\n";
    }
  }
}

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
    writeCluster(*c, llvm::outs());
    return 0;
  }
  auto buf = llvm::MemoryBuffer::getFile(planArg);
  if (!buf) {
    diag.error({}, "cannot read plan '" + planArg + "': " + buf.getError().message());
    return 1;
  }
  unsigned id = srcMgr.AddNewSourceBuffer(std::move(*buf), llvm::SMLoc());
  auto plan = loadPlan(id, diag);
  if (!plan)
    return 1;
  writePlan(*plan, llvm::outs());
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  if (!cl::ParseCommandLineOptions(argc, argv, "mist-yaml-check: load a cluster or plan file\n"))
    return 1;
  return run();
}
