//===- Vocabulary.h - The words of the .mist language, from the compiler's tables ===//
/// \file
/// Every word the language gives a meaning to, read from the tables the
/// compiler itself uses: the keywords of support/Token.def, the built-in
/// ops and their shard words (frontend/Builtins.cpp), the element types
/// (ir/Types.h) and the settings of the train section and its optimizer
/// (the tables below, which frontend/IRGenTrain.cpp reads and names in its
/// errors). `mistc --print-vocabulary` prints it as JSON for the editor
/// grammars' check (lang/editors/check.py), so nothing scrapes C++.
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

namespace mist {

/// A setting of the train section (or of its optimizer) and a value it
/// accepts: the tests set each one to its example.
struct SettingExample {
  const char *name;
  const char *example;
};

/// The train section's settings, in the order errors list them.
constexpr SettingExample trainSettings[] = {
    {"global_batch", "8"},
    {"seq_len", "64"},
    {"optimizer", "adamw(lr = 1e-3)"},
    {"lr", "3e-4"},
    {"warmup_steps", "10"},
    {"lr_decay", "wsd"},
    {"min_lr", "1e-5"},
    {"decay_fraction", "0.2"},
    {"grad_clip", "1.0"},
    {"dtype", "bf16"},
    {"master_dtype", "f32"},
    {"grad_dtype", "f32"},
    {"cluster", "\"a100-40g\""},
};

/// The settings inside `optimizer = adamw(...)`.
constexpr SettingExample optimizerSettings[] = {
    {"lr", "1e-3"}, {"betas", "(0.9, 0.95)"}, {"weight_decay", "0.1"},
    {"wd", "0.1"},  {"eps", "1e-8"},          {"no_decay", "(bias, norm)"},
};

/// The optimizers `optimizer = NAME(...)` names.
constexpr const char *optimizerNames[] = {"adamw", "sgd"};

/// "a, b, c" of a table's names (for error messages).
template <typename Table> std::string joinedNames(const Table &table) {
  std::string out;
  for (const auto &entry : table) {
    if (!out.empty())
      out += ", ";
    if constexpr (std::is_same_v<std::decay_t<decltype(entry)>, const char *>)
      out += entry;
    else
      out += entry.name;
  }
  return out;
}

struct Vocabulary {
  std::vector<std::string> keywords, builtins, shardWords, dtypes, trainSettings, optimizerSettings,
      optimizers;
};
Vocabulary languageVocabulary();
/// As one JSON object of string arrays.
void printVocabulary(const Vocabulary &v, llvm::raw_ostream &os);

} // namespace mist
