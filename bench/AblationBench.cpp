//===- AblationBench.cpp - Predicted speedup of each search space ---------===//
/// \file
/// The seed's ablation, on our performance model: GPT and Llama at 1.3B,
/// 2.7B, 7B, 13B and 22B on 8, 16 and 32 GPUs of the L4 (sequence 2048) and
/// A100-40GB (sequence 4096) presets, global batch 16 x GPUs. Each case is
/// tuned in every --space; the table gives the predicted speedup of each
/// space over `megatron` (what Megatron-LM can run: even layer splits, full
/// recomputation or none) and the geometric means, with the `deepspeed`
/// space (what DeepSpeed can run) and `megatron-lm` (the megatron space with
/// sequence parallelism, tp overlap and interleaving) beside the ladder. Nothing here is tuned to
/// the table: it is whatever the model and tuner predict.
/// Usage: mist-bench-ablation [out.json]
//===----------------------------------------------------------------------===//
#include "frontend/Frontend.h"
#include "passes/Pipeline.h"
#include "tuner/Tuner.h"
#include "yaml/ClusterLoader.h"
#include "llvm/Support/MemoryBuffer.h"
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fmt/format.h>
#include <fstream>

using namespace mist;

namespace {

struct Size {
  const char *name;
  int hidden, layers, heads, llamaFfn;
};

const Size sizes[] = {{"1.3B", 2048, 24, 16, 5632},
                      {"2.7B", 2560, 32, 32, 6912},
                      {"7B", 4096, 32, 32, 11008},
                      {"13B", 5120, 40, 40, 13824},
                      {"22B", 6144, 48, 64, 16384}};

std::string source(bool llama, const Size &s) {
  if (llama)
    return fmt::format("import \"llama\"\nmodel m = llama(vocab = 50304, hidden = {}, layers = {}, "
                       "heads = {}, ffn = {})\n",
                       s.hidden, s.layers, s.heads, s.llamaFfn);
  return fmt::format("import \"gpt\"\nmodel m = gpt(vocab = 50304, hidden = {}, layers = {}, "
                     "heads = {})\n",
                     s.hidden, s.layers, s.heads);
}

} // namespace

int main(int argc, char **argv) {
  std::string out = argc > 1 ? argv[1] : "bench/results/ablation.json";
  // The ablation ladder, then beside it (not steps of it) the deepspeed
  // space and what Megatron-LM itself runs: the megatron space with
  // sequence parallelism, tp-communication overlap and interleaved 1F1B,
  // which mistc's trainer does not run (so the ladder has none of them).
  struct Column {
    const char *name;
    SpaceLevel level;
    bool megatronKnobs;
  };
  const Column levels[] = {
      {"megatron", SpaceLevel::Megatron, false},  {"+zero", SpaceLevel::Zero, false},
      {"+ckpt", SpaceLevel::Ckpt, false},         {"+offload", SpaceLevel::Offload, false},
      {"full", SpaceLevel::Full, false},          {"deepspeed", SpaceLevel::DeepSpeed, false},
      {"megatron-lm", SpaceLevel::Megatron, true}};
  constexpr int numLevels = 7, full = 4, megatronLm = 6;
  struct ClusterCase {
    const char *preset;
    int seq;
  } clusters[] = {{"l4-24g", 2048}, {"a100-40g", 4096}};
  std::printf("%-9s %-6s %-5s %5s %11s", "cluster", "model", "size", "GPUs", "megatron s");
  for (int l = 1; l < numLevels; ++l)
    std::printf(" %9s", levels[l].name);
  std::printf(" %9s %8s\n", "full s", "tune s");
  std::string json =
      "{\n  \"benchmark\": \"predicted speedup over the megatron space\",\n  \"cases\": [\n";
  double logSum[numLevels] = {0};
  int counted = 0, richerOnly = 0; // cases megatron cannot fit but the full space can
  double logFullOverLm = 0;        // full against megatron-lm, where both fit
  int bothFit = 0;
  bool firstCase = true;
  for (const ClusterCase &cc : clusters)
    for (bool llama : {false, true})
      for (const Size &sz : sizes)
        for (int nodes : {1, 2, 4}) {
          int gpus = 8 * nodes;
          int64_t batch = 16 * gpus;
          llvm::SourceMgr sm;
          std::string diagText;
          llvm::raw_string_ostream diagOs(diagText);
          DiagnosticEngine diag(sm, diagOs);
          unsigned id = sm.AddNewSourceBuffer(
              llvm::MemoryBuffer::getMemBufferCopy(source(llama, sz), "ablation.mist"),
              llvm::SMLoc());
          FrontendOptions fo;
          fo.load.importDirs = {MIST_STDLIB_DIR};
          fo.gen.seqLen = cc.seq;
          fo.gen.globalBatch = batch;
          auto m = compileMist(id, fo, diag);
          if (!m || !runPipeline(*m, {}, diag))
            return 1;
          auto cluster = loadClusterByName(cc.preset, nodes, {MIST_CLUSTER_DIR}, diag);
          auto profile = ModelProfile::build(*m, diag);
          if (!cluster || !profile) {
            std::fprintf(stderr, "%s", diagText.c_str());
            return 1;
          }
          double seconds[numLevels];
          double tuneTime = 0;
          for (int l = 0; l < numLevels; ++l) {
            TunerOptions opts;
            opts.space.level = levels[l].level;
            opts.space.sequenceParallel = opts.space.tpCommOverlap = opts.space.interleaving =
                levels[l].megatronKnobs;
            auto start = std::chrono::steady_clock::now();
            auto r = tune(*profile, *cluster, batch, opts, diag);
            tuneTime +=
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            seconds[l] = r ? r->estimate.iterationSeconds : INFINITY;
          }
          std::printf("%-9s %-6s %-5s %5d %11s", cc.preset, llama ? "llama" : "gpt", sz.name, gpus,
                      std::isfinite(seconds[0]) ? fmt::format("{:.3f}", seconds[0]).c_str()
                                                : "no fit");
          // "-": no plan of that space (or of megatron) fits.
          for (int l = 1; l < numLevels; ++l)
            if (std::isfinite(seconds[0]) && std::isfinite(seconds[l]))
              std::printf(" %9.3f", seconds[0] / seconds[l]);
            else
              std::printf(" %9s", "-");
          std::printf(" %9.3f %8.1f\n", seconds[full], tuneTime);
          std::fflush(stdout);
          if (std::isfinite(seconds[full]) && std::isfinite(seconds[megatronLm])) {
            logFullOverLm += std::log(seconds[megatronLm] / seconds[full]);
            ++bothFit;
          }
          bool base = std::isfinite(seconds[0]);
          richerOnly += !base && std::isfinite(seconds[full]);
          if (base) {
            ++counted;
            for (int l = 0; l < numLevels; ++l)
              logSum[l] += std::isfinite(seconds[l]) ? std::log(seconds[0] / seconds[l]) : NAN;
          }
          json +=
              fmt::format("{}    {{\"cluster\": \"{}\", \"model\": \"{}\", \"size\": \"{}\", "
                          "\"gpus\": {}, \"global_batch\": {}, \"seq\": {}, \"iteration_s\": {{",
                          firstCase ? "" : ",\n", cc.preset, llama ? "llama" : "gpt", sz.name, gpus,
                          batch, cc.seq);
          for (int l = 0; l < numLevels; ++l)
            json +=
                fmt::format("{}\"{}\": {}", l ? ", " : "", levels[l].name,
                            std::isfinite(seconds[l]) ? fmt::format("{:.6g}", seconds[l]) : "null");
          json += fmt::format("}}, \"tune_s\": {:.2f}}}", tuneTime);
          firstCase = false;
        }
  std::printf("geometric mean speedup over megatron (%d cases where megatron fits):", counted);
  json += "\n  ],\n  \"geomean_speedup_over_megatron\": {";
  for (int l = 1; l < numLevels; ++l) {
    double g = counted ? std::exp(logSum[l] / counted) : NAN; // NaN if some case did not fit
    std::printf(" %s %.3f", levels[l].name, g);
    json += fmt::format("{}\"{}\": {:.4f}", l > 1 ? ", " : "", levels[l].name, g);
  }
  const double fullOverLm = bothFit ? std::exp(logFullOverLm / bothFit) : NAN;
  std::printf("\ncases where no megatron plan fits but a full-space plan does: %d\n", richerOnly);
  std::printf("geometric mean speedup of full (what mistc's trainer runs) over megatron-lm: %.3f "
              "(%d cases where both fit)\n",
              fullOverLm, bothFit);
  json +=
      fmt::format("}},\n  \"cases_counted\": {},\n  \"cases_only_full_space_fits\": {},\n"
                  "  \"geomean_full_over_megatron_lm\": {:.4f},\n  \"cases_both_fit\": {}\n}}\n",
                  counted, richerOnly, fullOverLm, bothFit);
  std::ofstream(out) << json;
  std::printf("wrote %s\n", out.c_str());
  return 0;
}
