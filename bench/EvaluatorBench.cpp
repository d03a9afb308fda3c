//===- EvaluatorBench.cpp - Strategy evaluations per second ---------------===//
/// \file
/// Measures how fast the performance model scores candidate strategies of
/// one stage on one core: the seed system's intra-stage grid (ZeRO levels x
/// offload ratios x checkpointed layers) for GPT-3 22B on an A100-40GB node,
/// evaluated with the compiled evaluator. Prints a table and writes JSON.
//===----------------------------------------------------------------------===//
#include "frontend/Frontend.h"
#include "passes/Pipeline.h"
#include "perfmodel/Evaluator.h"
#include "llvm/Support/MemoryBuffer.h"
#include <chrono>
#include <cstdio>
#include <fmt/format.h>
#include <fstream>

using namespace mist;

static Cluster benchCluster() {
  // The A100-40GB figures of the seed's template (mist-notes section 7).
  Cluster c;
  c.name = "a100-40g-bench";
  c.nodes = 1;
  c.gpusPerNode = 8;
  c.device = {"A100-SXM4-40GB", 40, 0.92, 312, 0.75, 1555, 0.8, {}};
  c.collectives = {{1, 2, 139, 10}, {1, 4, 193, 10}, {1, 8, 210, 10}};
  c.h2dGBs = 5.36;
  c.d2hGBs = 5.85;
  c.hostLatencyUs = 10;
  c.p2pIntraGBs = 139;
  c.p2pInterGBs = 10.7;
  c.interference = {{{Stream::Compute, Stream::G2G}, {1.05, 1.1}},
                    {{Stream::Compute, Stream::H2D, Stream::D2H}, {1.03, 1.1, 1.1}}};
  return c;
}

int main(int argc, char **argv) {
  std::string out = argc > 1 ? argv[1] : "bench/results/evaluator.json";
  llvm::SourceMgr sm;
  DiagnosticEngine diag(sm, llvm::errs());
  auto buf = llvm::MemoryBuffer::getFile(MIST_EXAMPLES_DIR "/gpt3-22b.mist");
  if (!buf) {
    std::fprintf(stderr, "cannot read the example\n");
    return 1;
  }
  unsigned id = sm.AddNewSourceBuffer(std::move(*buf), llvm::SMLoc());
  FrontendOptions fo;
  fo.load.importDirs = {MIST_STDLIB_DIR};
  fo.gen.seqLen = 4096;
  fo.gen.globalBatch = 512;
  auto m = compileMist(id, fo, diag);
  if (!m || !runPipeline(*m, {}, diag))
    return 1;
  auto profile = ModelProfile::build(*m, diag);
  if (!profile)
    return 1;
  Cluster cluster = benchCluster();

  // Stage context: 12 layers on 8 GPUs (dp 4, tp 2), b = 1, stage 0 of 4, G = 128.
  StageContext ctx;
  ctx.layers = 12;
  ctx.microBatch = 1;
  ctx.dp = 4;
  ctx.tp = 2;
  ctx.meshNodes = 1;
  ctx.meshGpusPerNode = 8;
  ctx.first = true;
  ctx.last = false;
  ctx.inflight = 4;
  ctx.gradAccum = 128;
  StageEvaluator eval(*profile, cluster, ctx);

  // The seed's grid: ZeRO-1/2/3 x wo, go in 6 values x oo, ao in 8 values
  // (minus wo > 0 with go = 0) x ckpt 0..12.
  const double sparse[] = {0, .25, .375, .5, .75, 1};
  const double dense[] = {0, .25, .375, .5, .625, .75, .875, 1};
  const ZeroFlags zeros[] = {{false, false, true}, {false, true, true}, {true, true, true}};
  StrategyBatch batch;
  for (const ZeroFlags &z : zeros)
    for (double wo : sparse)
      for (double go : sparse)
        for (double oo : dense)
          for (double ao : dense)
            for (int c = 0; c <= ctx.layers; ++c) {
              if (wo > 0 && go == 0)
                continue;
              batch.add(z, {wo, go, oo, ao}, c);
            }
  const size_t n = batch.size();
  std::vector<StrategyResult> results(n);
  eval.evaluate(batch, results); // warm-up
  double best = 0;
  std::vector<double> rates;
  for (int rep = 0; rep < 7; ++rep) {
    auto start = std::chrono::steady_clock::now();
    const int inner = 20;
    for (int i = 0; i < inner; ++i)
      eval.evaluate(batch, results);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    rates.push_back(inner * n / s);
  }
  std::sort(rates.begin(), rates.end());
  double median = rates[rates.size() / 2];
  best = rates.back();
  size_t feasible = 0;
  for (const StrategyResult &r : results)
    feasible += r.fits;

  std::printf("%-44s %s\n", "case", "value");
  std::printf("%-44s %zu\n", "strategies per batch", n);
  std::printf("%-44s %zu\n", "feasible under 40 GB x 0.92", feasible);
  std::printf("%-44s %.3g\n", "evaluations/s, one core (median of 7)", median);
  std::printf("%-44s %.3g\n", "evaluations/s, one core (best of 7)", best);
  std::printf("%-44s %.1f ns\n", "time per evaluation (median)", 1e9 / median);
  std::ofstream js(out);
  js << fmt::format("{{\n  \"benchmark\": \"stage strategy evaluator\",\n"
                    "  \"model\": \"gpt3_22b, seq 4096\",\n"
                    "  \"context\": \"12 layers, b 1, dp 4, tp 2, stage 0 of 4, G 128\",\n"
                    "  \"strategies_per_batch\": {},\n  \"feasible\": {},\n"
                    "  \"evaluations_per_s\": {:.6g},\n  \"evaluations_per_s_best\": {:.6g},\n"
                    "  \"threads\": 1\n}}\n",
                    n, feasible, median, best);
  std::printf("wrote %s\n", out.c_str());
  return 0;
}
