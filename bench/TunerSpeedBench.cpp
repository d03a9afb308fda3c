//===- TunerSpeedBench.cpp - Wall time of whole tuning runs ---------------===//
/// \file
/// Tunes the two cases of the tuner issue in the full space and reports the
/// wall time on this machine (single-threaded), the number of strategies
/// scored and MILPs solved, and the predicted iteration time of the plan.
/// Usage: mist-bench-tuner [out.json]
//===----------------------------------------------------------------------===//
#include "frontend/Frontend.h"
#include "passes/Pipeline.h"
#include "tuner/Tuner.h"
#include "yaml/ClusterLoader.h"
#include "llvm/Support/MemoryBuffer.h"
#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <fstream>

using namespace mist;

namespace {

struct Case {
  const char *name, *example, *cluster;
  int nodes;
  int64_t globalBatch, seqLen;
  double targetSeconds;
};

struct Outcome {
  double seconds = 0, iteration = 0, tflops = 0;
  uint64_t evaluations = 0, milps = 0;
  int stages = 0;
  bool ok = false;
};

Outcome runCase(const Case &c) {
  Outcome o;
  llvm::SourceMgr sm;
  DiagnosticEngine diag(sm, llvm::errs());
  auto buf = llvm::MemoryBuffer::getFile(std::string(MIST_EXAMPLES_DIR) + "/" + c.example);
  if (!buf)
    return o;
  unsigned id = sm.AddNewSourceBuffer(std::move(*buf), llvm::SMLoc());
  FrontendOptions fo;
  fo.load.importDirs = {MIST_STDLIB_DIR};
  fo.gen.seqLen = c.seqLen;
  fo.gen.globalBatch = c.globalBatch;
  auto start = std::chrono::steady_clock::now();
  auto m = compileMist(id, fo, diag);
  if (!m || !runPipeline(*m, {}, diag))
    return o;
  auto cluster = loadClusterByName(c.cluster, c.nodes, {MIST_CLUSTER_DIR}, diag);
  auto profile = ModelProfile::build(*m, diag);
  if (!cluster || !profile)
    return o;
  TunerOptions opts;
  auto r = tune(*profile, *cluster, c.globalBatch, opts, diag);
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!r)
    return o;
  o.ok = true;
  o.iteration = r->estimate.iterationSeconds;
  o.tflops = r->estimate.tflopsPerGpu;
  o.evaluations = r->stats.evaluations;
  o.milps = r->stats.milps;
  o.stages = static_cast<int>(r->plan.stages.size());
  return o;
}

} // namespace

int main(int argc, char **argv) {
  std::string out = argc > 1 ? argv[1] : "bench/results/tuner_speed.json";
  const Case cases[] = {
      {"gpt3-22b on 4 x 8 A100-40GB, batch 512, seq 4096", "gpt3-22b.mist", "a100-40g", 4, 512,
       4096, 10},
      {"gpt3-175b on 128 x 8 H100-80GB, batch 1536, seq 2048", "gpt3-175b.mist", "h100-80g", 128,
       1536, 2048, 60},
  };
  std::printf("%-56s %9s %8s %12s %7s %7s %12s %9s\n", "case", "wall s", "target", "evaluations",
              "MILPs", "stages", "iteration s", "TFLOP/s");
  std::string json =
      "{\n  \"benchmark\": \"tuner wall time, full space, one thread\",\n  \"cases\": [\n";
  bool first = true;
  for (const Case &c : cases) {
    Outcome o = runCase(c);
    std::printf("%-56s %9.2f %8.0f %12llu %7llu %7d %12.3f %9.1f%s\n", c.name, o.seconds,
                c.targetSeconds, (unsigned long long)o.evaluations, (unsigned long long)o.milps,
                o.stages, o.iteration, o.tflops, o.ok ? "" : "  (no plan)");
    json +=
        fmt::format("{}    {{\"case\": \"{}\", \"wall_s\": {:.3f}, \"target_s\": {}, "
                    "\"evaluations\": {}, \"milps\": {}, \"stages\": {}, "
                    "\"predicted_iteration_s\": {:.6g}, \"tflops_per_gpu\": {:.4g}, \"ok\": {}}}",
                    first ? "" : ",\n", c.name, o.seconds, c.targetSeconds, o.evaluations, o.milps,
                    o.stages, o.iteration, o.tflops, o.ok ? "true" : "false");
    first = false;
  }
  json += "\n  ]\n}\n";
  std::ofstream(out) << json;
  std::printf("wrote %s\n", out.c_str());
  return 0;
}
