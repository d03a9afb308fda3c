//===- TrainerSizesTest.cpp - Sizes in train.cu, in the model's symbols ---===//
#include "backend/trainer/TrainerSizes.h"

#include <fstream>
#include <gtest/gtest.h>
#include <regex>
#include <sstream>

using namespace mist;

namespace {

struct Syms {
  SymbolTable t;
  Expr b, s, h, heads, tp;
  Syms() {
    b = t.declare("b", SymbolKind::Batch, std::nullopt)->sym;
    s = t.declare("s", SymbolKind::Seq, 64)->sym;
    h = t.declare("hidden", SymbolKind::Model, 1024)->sym;
    heads = t.declare("heads", SymbolKind::Model, 16)->sym;
    tp = t.declare("tp", SymbolKind::TP, std::nullopt)->sym;
  }
};

TEST(TrainerSizes, WritesSizesInTheSymbolsAndDeclaresWhatItUsed) {
  Syms x;
  TrainerSizes sizes(x.t, /*microBatch=*/4, /*tp=*/2);
  EXPECT_EQ(sizes.declarations(), "");
  EXPECT_EQ(sizes.text(3 * x.b * x.s * x.h / x.tp), "3*b*s*hidden/tp");
  EXPECT_EQ(sizes.value(3 * x.b * x.s * x.h / x.tp), 3 * 4 * 64 * 1024 / 2);
  // head_dim of a tp shard's heads: simplified before printing.
  EXPECT_EQ(sizes.text((x.h / x.tp) / (x.h / x.heads)), "heads/tp");
  EXPECT_EQ(sizes.text(x.s * x.s), "s*s");
  EXPECT_EQ(sizes.text(Expr(7)), "7");
  // Declared in declaration order, only what was printed (not heads' value
  // through h/heads above, which printed `heads`).
  EXPECT_EQ(sizes.declarations(),
            "constexpr int64_t b = 4, s = 64, hidden = 1024, heads = 16, tp = 2;");
}

TEST(TrainerSizes, SumsAndDivisionsAreParenthesizedAsFactors) {
  Syms x;
  TrainerSizes sizes(x.t, 4, 2);
  EXPECT_EQ(sizes.factor(x.h / x.tp), "(hidden/tp)");
  EXPECT_EQ(sizes.factor(2 * x.h), "2*hidden");
  EXPECT_EQ(sizes.factor(x.h + x.s), "(s + hidden)");
}

TEST(TrainerSizes, ATermThatIsNotWholePrintsTheValue) {
  // C++ would compute hidden/3 + 2/3 as 341 + 0; the size is 342.
  Syms x;
  TrainerSizes sizes(x.t, 4, 2);
  EXPECT_EQ(sizes.text(x.h / 3 + Expr(2) / 3), "342");
  EXPECT_EQ(sizes.declarations(), "");
  // Whole terms with a rational coefficient divide last: 3*hidden/2.
  EXPECT_EQ(sizes.text(3 * x.h / 2), "3*hidden/2");
}

TEST(TrainerSizes, NamesTheTrainerUsesAreNotShadowed) {
  SymbolTable t;
  for (const char *name : {"C", "add", "int", "s0_x", "stage1", "spec", "G"})
    t.declare(name, SymbolKind::Model, 8);
  TrainerSizes sizes(t, 1, 1);
  Expr product = 1;
  for (const Symbol &s : t.symbols())
    product *= s.sym;
  EXPECT_EQ(sizes.text(product), "C_*add_*int_*size_s0_x*stage1_*spec_*G_");
  // Names nobody uses stay as they are.
  EXPECT_FALSE(isTrainerReservedName("hidden"));
  EXPECT_FALSE(isTrainerReservedName("s"));
  EXPECT_FALSE(isTrainerReservedName("stages"));
}

TEST(TrainerSizes, EveryRuntimeOpIsReserved) {
  // train.cu calls runtime/ops unqualified (using namespace), so a size
  // named like one would hide it.
  std::ifstream in(MIST_EXAMPLES_DIR "/../runtime/ops/Ops.h");
  ASSERT_TRUE(in) << "cannot read runtime/ops/Ops.h";
  std::stringstream text;
  text << in.rdbuf();
  const std::string ops = text.str();
  std::regex declaration(R"(\nvoid ([A-Za-z0-9_]+)\()");
  int seen = 0;
  for (auto it = std::sregex_iterator(ops.begin(), ops.end(), declaration);
       it != std::sregex_iterator(); ++it, ++seen)
    EXPECT_TRUE(isTrainerReservedName((*it)[1].str())) << (*it)[1].str();
  EXPECT_GT(seen, 20);
}

} // namespace
