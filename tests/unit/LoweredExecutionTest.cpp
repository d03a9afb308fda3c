//===- LoweredExecutionTest.cpp - The lowered model computes its gradient --===//
/// End to end at tp = 1 on one rank: the lowered tiny GPT and tiny Llama run
/// forward and backward through the runtime's CPU ops, the loss of random
/// weights is near ln(vocab), and every parameter's gradient (the tied
/// embedding's two contributions summed) matches central finite differences
/// of the loss.
//===----------------------------------------------------------------------===//
#include "LoweredExecutor.h"
#include "TestUtil.h"

using namespace mist;
using namespace mist::test;

namespace {

struct Case {
  const char *file;
  std::vector<std::pair<std::string, int>> params; ///< (name, layer) to check
};

class LoweredGradient : public ::testing::TestWithParam<Case> {};

TEST_P(LoweredGradient, MatchesFiniteDifferences) {
  auto c = compileFile(std::string(MIST_EXAMPLES_DIR) + GetParam().file,
                       {"shape-infer", "tp-shard", "backward"});
  ASSERT_TRUE(c->module) << c->diagText;
  const int b = 2, layers = 2;
  auto st = lowerForStage(*c->module, b, 1, c->diag);
  ASSERT_TRUE(st) << c->diagText;
  LoweredExecutor ex(*st, layers, 5);
  const int seq = static_cast<int>(st->buffers[st->moduleInputs[0]].shape[1]);
  std::mt19937 rng(9);
  std::uniform_int_distribution<int32_t> token(0, 255);
  std::vector<int32_t> tokens(b * seq), targets(b * seq);
  for (auto &t : tokens)
    t = token(rng);
  for (auto &t : targets)
    t = token(rng);
  ex.setInputs(tokens, targets);
  float loss = ex.forward();
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_GT(loss, 0.5 * std::log(256.0));
  EXPECT_LT(loss, 2.0 * std::log(256.0));
  ex.backward();
  for (auto &[name, layer] : GetParam().params) {
    std::vector<float> g = ex.grad(name, layer);
    std::vector<float> &w = ex.param(name, layer);
    ASSERT_FALSE(g.empty()) << name;
    // A few elements, spread over the tensor.
    for (size_t e : {size_t(0), w.size() / 3, w.size() - 1}) {
      const float saved = w[e], h = 1e-2f;
      w[e] = saved + h;
      double up = ex.forward();
      w[e] = saved - h;
      double down = ex.forward();
      w[e] = saved;
      double numeric = (up - down) / (2 * h);
      EXPECT_NEAR(g[e], numeric, 2e-3 + 2e-2 * std::abs(numeric))
          << name << " layer " << layer << " [" << e << "]";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    TinyModels, LoweredGradient,
    ::testing::Values(Case{"/tiny-gpt.mist",
                           {{"pre.embedding.weight", 0}, // tied with the head: two contributions
                            {"pre.position_embedding.weight", 0},
                            {"layer.ln1.weight", 0},
                            {"layer.attn.qkv.weight", 1},
                            {"layer.attn.qkv.bias", 0},
                            {"layer.attn.out.weight", 1},
                            {"layer.mlp.fc1.weight", 0},
                            {"layer.mlp.fc2.bias", 1},
                            {"post.ln_f.bias", 0}}},
                      Case{"/tiny-llama.mist",
                           {{"pre.x.weight", 0},
                            {"layer.attn_norm.weight", 0},
                            {"layer.attn.q.weight", 1},
                            {"layer.attn.k.weight", 0},
                            {"layer.attn.v.weight", 1},
                            {"layer.mlp.gate.weight", 0},
                            {"layer.mlp.down.weight", 1},
                            {"post.logits.weight", 0}}},
                      // slice's and concat's gradients reach the parameters before them
                      Case{"/../tests/unit/Inputs/slice-concat.mist",
                           {{"layer.qkv.weight", 0},
                            {"layer.qkv.bias", 1},
                            {"layer.ln2.weight", 1},
                            {"layer.up.weight", 0},
                            {"pre.x.weight", 0}}}),
    [](const auto &info) {
      const std::string file = info.param.file;
      return file.find("slice") != std::string::npos ? "tiny_slice_concat"
             : file.find("gpt") != std::string::npos ? "tiny_gpt"
                                                     : "tiny_llama";
    });

} // namespace
