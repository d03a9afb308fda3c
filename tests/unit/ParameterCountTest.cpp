//===- ParameterCountTest.cpp - Parameter counts of the examples ----------===//
/// Llama-2 and Falcon counts must be within 0.5% of the published figures, and the GPT counts
/// must equal the closed form 12*L*h^2 + 13*L*h + V*h + s*h + 2*h (tied
/// head; per layer 4h^2+4h attention, 8h^2+5h MLP, 4h LayerNorms).
//===----------------------------------------------------------------------===//
#include "TestUtil.h"
#include "backend/reports/Summary.h"
#include <cctype>

using namespace mist;
using namespace mist::test;

namespace {

struct Published {
  const char *file;
  double params;
};

class PublishedCount : public ::testing::TestWithParam<Published> {};

/// "gpt3-1.3b.mist" -> "gpt3_1_3b": test names that say which example failed.
std::string exampleName(const char *file) {
  std::string name(file);
  name = name.substr(0, name.rfind(".mist"));
  for (char &ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)))
      ch = '_';
  return name;
}

TEST_P(PublishedCount, WithinHalfAPercent) {
  auto c = compileFile(std::string(MIST_EXAMPLES_DIR) + "/" + GetParam().file, {"shape-infer"});
  ASSERT_TRUE(c->module) << c->diagText;
  auto n = countParameters(*c->module);
  ASSERT_TRUE(n.has_value());
  double rel = std::abs(static_cast<double>(*n) - GetParam().params) / GetParam().params;
  EXPECT_LT(rel, 0.005) << GetParam().file << ": " << *n << " vs " << GetParam().params;
}

INSTANTIATE_TEST_SUITE_P(Examples, PublishedCount,
                         ::testing::Values(Published{"llama2-7b.mist", 6.74e9},
                                           Published{"llama2-13b.mist", 13.0e9},
                                           Published{"llama2-70b.mist", 69.0e9},
                                           Published{"falcon-7b.mist", 6.92e9}),
                         [](const auto &info) { return exampleName(info.param.file); });
// GPT-3's names are rounded (the 1.3B model has 1.316B parameters with
// Megatron's padded vocabulary), so GPT is checked against its closed form.

struct GptShape {
  const char *file;
  int64_t hidden, layers, vocab, seq;
};

class GptClosedForm : public ::testing::TestWithParam<GptShape> {};

TEST_P(GptClosedForm, MatchesTheFormulaExactly) {
  const GptShape &g = GetParam();
  auto c = compileFile(std::string(MIST_EXAMPLES_DIR) + "/" + g.file);
  ASSERT_TRUE(c->module) << c->diagText;
  int64_t h = g.hidden, L = g.layers;
  int64_t expected = 12 * L * h * h + 13 * L * h + g.vocab * h + g.seq * h + 2 * h;
  EXPECT_EQ(countParameters(*c->module), expected);
}

INSTANTIATE_TEST_SUITE_P(Gpt3, GptClosedForm,
                         ::testing::Values(GptShape{"gpt3-1.3b.mist", 2048, 24, 50304, 2048},
                                           GptShape{"gpt3-2.7b.mist", 2560, 32, 50304, 2048},
                                           GptShape{"gpt3-6.7b.mist", 4096, 32, 50304, 2048},
                                           GptShape{"gpt3-13b.mist", 5120, 40, 50304, 2048},
                                           GptShape{"gpt3-22b.mist", 6144, 48, 50304, 2048},
                                           GptShape{"gpt3-175b.mist", 12288, 96, 50304, 2048}),
                         [](const auto &info) { return exampleName(info.param.file); });

TEST(ParameterCount, LlamaClosedForm) {
  // Per layer: q, o: h^2; k, v: h * kv * h/a; gate, up, down: h * ffn; 2 norms.
  auto c = compileFile(std::string(MIST_EXAMPLES_DIR) + "/llama2-70b.mist");
  ASSERT_TRUE(c->module) << c->diagText;
  int64_t h = 8192, L = 80, a = 64, kv = 8, ffn = 28672, V = 32000;
  int64_t layer = 2 * h * h + 2 * h * kv * (h / a) + 3 * h * ffn + 2 * h;
  EXPECT_EQ(countParameters(*c->module), L * layer + 2 * V * h + h);
}

} // namespace
