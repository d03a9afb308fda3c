//===- PlanLoaderTest.cpp - Plan files: loading, checks, round trip -------===//
#include "yaml/PlanLoader.h"
#include "SourceDiagnostics.h"
#include "yaml/PlanWriter.h"
#include <gtest/gtest.h>

using namespace mist;

namespace {

/// What the loader reported, and the plan it loaded.
struct Loaded : test::SourceDiagnostics {
  std::optional<Plan> plan;
};

std::unique_ptr<Loaded> loadText(const std::string &text) {
  auto l = std::make_unique<Loaded>();
  unsigned id = l->addBuffer(text, "plan.yaml");
  l->plan = loadPlan(id, l->diag);
  return l;
}

std::string written(const Plan &p) {
  std::string s;
  llvm::raw_string_ostream os(s);
  writePlan(p, os);
  return os.str();
}

/// The example of DESIGN.md section 9 (whose stage has 4 x 2 x 16 = 128
/// sequences per iteration, not 512), with a second stage.
const char *designPlan = R"(mist_plan: 1
model: gpt3_1_3b
cluster: a100-40g-x8
global_batch: 512
grad_accum: 16
stages:
  - layers: [0, 11]            # inclusive; stage 0 also runs `pre`, the last runs `post`
    mesh: {nodes: 1, gpus_per_node: 4}
    micro_batch: 4
    dp: 2
    tp: 2
    zero: {weights: false, grads: false, optimizer: true}
    ckpt_layers: 5
    offload: {weights: 0.0, grads: 0.0, optimizer: 0.25, activations: 0.0}
  - layers: [12, 23]
    mesh: {nodes: 2, gpus_per_node: 2}
    micro_batch: 8
    dp: 4
    tp: 1
predicted: {iteration_s: 9.27, tokens_per_s: 113000, peak_gib: [31.2, 28.9]}
)";

std::string replaced(std::string text, const std::string &from, const std::string &to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos)
    text.replace(at, from.size(), to);
  return text;
}

void expectError(const std::string &text, const std::string &lineCol, const std::string &message) {
  auto l = loadText(text);
  EXPECT_FALSE(l->plan);
  EXPECT_NE(l->errors().find("plan.yaml:" + lineCol + ": error: " + message), std::string::npos)
      << "expected '" << message << "' at " << lineCol << ", got:\n"
      << l->errors();
}

} // namespace

TEST(PlanLoader, LoadsTheDesignExample) {
  auto l = loadText(designPlan);
  EXPECT_FALSE(l->plan);
  EXPECT_NE(l->errors().find("plan.yaml:9:18: error: micro_batch (4) x dp (2) x grad_accum (16) "
                             "= 128 does not match global_batch 512"),
            std::string::npos)
      << l->errors();
  l = loadText(replaced(designPlan, "micro_batch: 4", "micro_batch: 16"));
  ASSERT_TRUE(l->plan) << l->errors();
  const Plan &p = *l->plan;
  EXPECT_EQ(p.version, 1);
  EXPECT_EQ(p.model, "gpt3_1_3b");
  EXPECT_EQ(p.cluster, "a100-40g-x8");
  EXPECT_EQ(p.globalBatch, 512);
  EXPECT_EQ(p.gradAccum, 16);
  ASSERT_EQ(p.stages.size(), 2u);
  const StagePlan &s0 = p.stages[0], &s1 = p.stages[1];
  EXPECT_EQ(s0.firstLayer, 0);
  EXPECT_EQ(s0.lastLayer, 11);
  EXPECT_EQ(s0.gpus(), 4);
  EXPECT_EQ(s0.microBatch, 16);
  EXPECT_EQ(s0.dp, 2);
  EXPECT_EQ(s0.tp, 2);
  EXPECT_TRUE(s0.zero.optimizer);
  EXPECT_FALSE(s0.zero.weights);
  EXPECT_EQ(s0.ckptLayers, 5);
  EXPECT_EQ(s0.offload.optimizer, 0.25);
  // Optional stage keys take their defaults.
  EXPECT_EQ(s1.layers(), 12);
  EXPECT_EQ(s1.zero, ZeroFlags());
  EXPECT_EQ(s1.offload, OffloadRatios());
  EXPECT_EQ(s1.ckptLayers, 0);
  ASSERT_TRUE(p.predicted);
  EXPECT_EQ(p.predicted->iterationSeconds, 9.27);
  EXPECT_EQ(p.predicted->tokensPerSecond, 113000);
  EXPECT_EQ(p.predicted->peakGiB, (std::vector<double>{31.2, 28.9}));
}

TEST(PlanLoader, RoundTrip) {
  Plan p;
  p.model = "gpt3_1_3b";
  p.cluster = "h100-80g";
  p.globalBatch = 96;
  p.gradAccum = 3;
  StagePlan a;
  a.firstLayer = 0;
  a.lastLayer = 6;
  a.meshNodes = 1;
  a.meshGpusPerNode = 8;
  a.microBatch = 4;
  a.dp = 8;
  a.tp = 1;
  a.zero = ZeroFlags::ofLevel(3);
  a.ckptLayers = 7;
  a.offload = {0.1 + 0.2, 1.0 / 3.0, 0.375, 1.0};
  StagePlan b = a;
  b.firstLayer = 7;
  b.lastLayer = 23;
  b.meshNodes = 2;
  b.dp = 4;
  b.tp = 4;
  b.microBatch = 8;
  b.zero = {};
  b.ckptLayers = 0;
  b.offload = {};
  p.stages = {a, b};
  p.predicted = PlanPrediction{1.0 / 7.0, 123456.789, {71.3 + 1e-12, 1e-7}};

  std::string text = written(p);
  auto l = loadText(text);
  ASSERT_TRUE(l->plan) << l->errors() << text;
  EXPECT_EQ(*l->plan, p) << text;
  EXPECT_EQ(written(*l->plan), text); // and the text is a fixed point

  // Without a prediction, names that need quoting, and an empty peak list.
  p.predicted.reset();
  p.model = "my model: \"v2\"\\x";
  p.cluster = "true";
  l = loadText(written(p));
  ASSERT_TRUE(l->plan) << l->errors() << written(p);
  EXPECT_EQ(*l->plan, p) << written(p);
  p.model.clear();
  p.cluster = "8";
  p.predicted = PlanPrediction{2.5, 0, {}};
  l = loadText(written(p));
  ASSERT_TRUE(l->plan) << l->errors() << written(p);
  EXPECT_EQ(*l->plan, p) << written(p);

  // The plan-wide schedule keys.
  p.virtualStages = 2;
  p.sequenceParallel = true;
  p.tpCommOverlap = true;
  l = loadText(written(p));
  ASSERT_TRUE(l->plan) << l->errors() << written(p);
  EXPECT_EQ(*l->plan, p) << written(p);
}

TEST(PlanLoader, WriterFormat) {
  Plan p;
  p.model = "m";
  p.globalBatch = 8;
  p.gradAccum = 2;
  StagePlan s;
  s.lastLayer = 1;
  s.microBatch = 4;
  s.offload.activations = 0.5;
  p.stages = {s};
  p.predicted = PlanPrediction{9.27, 113000, {31.2}};
  EXPECT_EQ(written(p), R"(mist_plan: 1
model: m
global_batch: 8
grad_accum: 2
stages:
  - layers: [0, 1]
    mesh: {nodes: 1, gpus_per_node: 1}
    micro_batch: 4
    dp: 1
    tp: 1
    zero: {weights: false, grads: false, optimizer: false}
    ckpt_layers: 0
    offload: {weights: 0.0, grads: 0.0, optimizer: 0.0, activations: 0.5}
predicted: {iteration_s: 9.27, tokens_per_s: 113000.0, peak_gib: [31.2]}
)");
  EXPECT_EQ(yamlQuote("a100-40g-x8"), "a100-40g-x8");
  EXPECT_EQ(yamlQuote("No"), "\"No\"");
  EXPECT_EQ(yamlQuote("1b"), "\"1b\"");
  EXPECT_EQ(yamlQuote(""), "\"\"");
}

TEST(PlanLoader, RejectsBadPlans) {
  std::string ok = replaced(designPlan, "micro_batch: 4", "micro_batch: 16");
  ASSERT_TRUE(loadText(ok)->plan);
  expectError(replaced(ok, "mist_plan: 1", "mist_plan: 2"), "1:12",
              "unsupported plan version 2 (this mistc reads 1)");
  expectError(replaced(ok, "layers: [12, 23]", "layers: [13, 23]"), "15:13",
              "stage 1 starts at layer 13 but stage 0 ends at layer 11 (expected 12)");
  expectError(replaced(ok, "layers: [12, 23]", "layers: [11, 23]"), "15:13",
              "stage 1 starts at layer 11 but stage 0 ends at layer 11 (expected 12)");
  expectError(replaced(ok, "layers: [0, 11]", "layers: [1, 11]"), "7:13",
              "the first stage must start at layer 0, not 1");
  expectError(replaced(ok, "layers: [12, 23]", "layers: [12, 10]"), "15:13",
              "layer range [12, 10] is empty");
  expectError(replaced(ok, "layers: [12, 23]", "layers: [12]"), "15:13",
              "'layers' must be [first, last] (inclusive)");
  expectError(replaced(ok, "ckpt_layers: 5", "ckpt_layers: 13"), "13:18",
              "'ckpt_layers' (13) exceeds the stage's 12 layers");
  expectError(replaced(ok, "optimizer: 0.25", "optimizer: 1.25"), "14:52",
              "'optimizer' must be in [0, 1]");
  expectError(replaced(ok, "dp: 4\n", "dp: 2\n"), "18:9",
              "dp (2) x tp (1) = 2 does not match the mesh's 4 GPUs (2 x 2)");
  expectError(replaced(ok, "grad_accum: 16", "grad_accum: 8"), "9:18",
              "micro_batch (16) x dp (2) x grad_accum (8) = 256 does not match global_batch 512");
  expectError(replaced(ok, "    tp: 1\n", "    tp: 1\n    tensor_parallel: 2\n"), "20:5",
              "unknown key 'tensor_parallel' in 'stage 1'");
  expectError(replaced(ok, "    ckpt_layers: 5", "    ckpt_layer: 5"), "13:5",
              "unknown key 'ckpt_layer' in 'stage 0'; did you mean 'ckpt_layers'?");
  expectError(replaced(ok, "weights: false, grads", "weights: no, grads"), "12:21",
              "expected true or false for 'weights', found 'no'");
  // ZeRO's levels nest: the weights only with the gradients, those only
  // with the optimizer state.
  expectError(replaced(ok, "weights: false, grads: false, optimizer: true",
                       "weights: true, grads: false, optimizer: true"),
              "12:11",
              "'zero' shards the weights over dp but not the gradients: ZeRO's levels nest");
  expectError(
      replaced(ok, "weights: false, grads: false, optimizer: true",
               "weights: false, grads: true, optimizer: false"),
      "12:11",
      "'zero' shards the gradients over dp but not the optimizer state: ZeRO's levels nest");
  expectError(replaced(ok, "    mesh: {nodes: 2, gpus_per_node: 2}\n", ""), "15:5",
              "missing key 'mesh' in 'stage 1'");
  expectError(replaced(ok, "peak_gib: [31.2, 28.9]", "peak_gib: [31.2]"), "20:64",
              "'peak_gib' has 1 entries for 2 stages");
  expectError(replaced(ok, "peak_gib: [31.2, 28.9]", "peak_gib: [31.2, -1]"), "20:71",
              "a peak memory must not be negative");
  expectError("mist_plan: 1\nglobal_batch: 8\ngrad_accum: 1\nstages: []\n", "4:9",
              "a plan needs at least one stage");
  expectError("mist_plan: 1\nglobal_batch: 8\n", "1:1", "missing key 'grad_accum' in 'plan'");
  expectError("mist_plan: 1\nstages: [\n", "3:1", "invalid YAML");
}
