//===- VocabularyTest.cpp - The language's words from the compiler's tables ===//
/// The tables `mistc --print-vocabulary` prints (and the editor grammars are
/// checked against) are the ones the compiler reads: every train and
/// optimizer setting listed is accepted, an unknown one is refused with the
/// list, and every listed op is a built-in.
//===----------------------------------------------------------------------===//
#include "frontend/Vocabulary.h"
#include "TestUtil.h"
#include "frontend/Builtins.h"

#include <algorithm>

using namespace mist;
using namespace mist::test;

namespace {

/// `train { ... }` with every setting of the table at its example, the
/// optimizer with every optimizer setting.
std::string everySetting() {
  std::string optimizer = "adamw(";
  for (const SettingExample &s : optimizerSettings)
    optimizer += std::string(optimizer.back() == '(' ? "" : ", ") + s.name + " = " + s.example;
  optimizer += ")";
  std::string train = "train {\n";
  for (const SettingExample &s : trainSettings)
    train += std::string("  ") + s.name + " = " +
             (std::string(s.name) == "optimizer" ? optimizer : s.example) + "\n";
  return train + "}\n";
}

const char *model = "import \"gpt\"\n"
                    "model g = gpt(vocab = 256, hidden = 64, layers = 2, heads = 4)\n";

} // namespace

TEST(Vocabulary, EveryListedSettingIsAccepted) {
  auto c = compile(std::string(model) + everySetting(), {"shape-infer"});
  EXPECT_TRUE(c->module) << everySetting() << c->diagText;
}

TEST(Vocabulary, AnUnknownSettingIsRefusedWithTheList) {
  auto c = compile(std::string(model) + "train {\n  learning_rate = 1e-3\n}\n", {"shape-infer"});
  EXPECT_FALSE(c->module);
  EXPECT_NE(c->diagText.find("unknown train setting 'learning_rate' (expected " +
                             joinedNames(trainSettings) + ")"),
            std::string::npos)
      << c->diagText;
  c = compile(std::string(model) + "train {\n  optimizer = adamw(momentum = 0.9)\n}\n",
              {"shape-infer"});
  EXPECT_FALSE(c->module);
  EXPECT_NE(c->diagText.find("unknown optimizer setting 'momentum' (expected " +
                             joinedNames(optimizerSettings) + ")"),
            std::string::npos)
      << c->diagText;
}

TEST(Vocabulary, ListsTheCompilersWords) {
  const Vocabulary v = languageVocabulary();
  for (const std::string &op : v.builtins)
    EXPECT_NE(lookupBuiltin(op), nullptr) << op;
  EXPECT_EQ(v.builtins.size(), allBuiltins().size());
  auto has = [](const std::vector<std::string> &words, const char *w) {
    return std::find(words.begin(), words.end(), w) != words.end();
  };
  EXPECT_TRUE(has(v.keywords, "train"));
  EXPECT_TRUE(has(v.keywords, "repeat"));
  EXPECT_TRUE(has(v.shardWords, "column"));
  EXPECT_TRUE(has(v.dtypes, "bf16"));
  EXPECT_EQ(v.trainSettings.size(), std::size(trainSettings));
  std::string json;
  llvm::raw_string_ostream os(json);
  printVocabulary(v, os);
  EXPECT_NE(json.find("\"optimizers\": [\"adamw\", \"sgd\"]"), std::string::npos) << json;
}
