//===- Vocabulary.cpp - The words of the .mist language -------------------===//
#include "frontend/Vocabulary.h"

#include "frontend/Builtins.h"
#include "ir/Types.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include <algorithm>

using namespace mist;

Vocabulary mist::languageVocabulary() {
  Vocabulary v;
#define MIST_TOKEN(Kind, Spelling)
#define MIST_KEYWORD(Kind, Spelling) v.keywords.push_back(Spelling);
#include "support/Token.def"
  for (const Builtin &b : allBuiltins()) {
    v.builtins.push_back(b.name);
    for (const BuiltinParam &p : b.params)
      if (llvm::StringRef(p.name) == "shard") {
        llvm::SmallVector<llvm::StringRef, 4> words;
        llvm::StringRef(p.words).split(words, ',');
        for (llvm::StringRef w : words)
          if (std::find(v.shardWords.begin(), v.shardWords.end(), w.str()) == v.shardWords.end())
            v.shardWords.push_back(w.str());
      }
  }
  for (DType t : allDTypes)
    v.dtypes.push_back(dtypeName(t).str());
  for (const SettingExample &s : trainSettings)
    v.trainSettings.push_back(s.name);
  for (const SettingExample &s : optimizerSettings)
    v.optimizerSettings.push_back(s.name);
  for (const char *name : optimizerNames)
    v.optimizers.push_back(name);
  return v;
}

void mist::printVocabulary(const Vocabulary &v, llvm::raw_ostream &os) {
  auto list = [&](const char *key, const std::vector<std::string> &words, bool last) {
    os << "  \"" << key << "\": [";
    for (size_t i = 0; i < words.size(); ++i)
      os << (i ? ", " : "") << '"' << words[i] << '"';
    os << "]" << (last ? "\n" : ",\n");
  };
  os << "{\n";
  list("keywords", v.keywords, false);
  list("builtins", v.builtins, false);
  list("shard_words", v.shardWords, false);
  list("dtypes", v.dtypes, false);
  list("train_settings", v.trainSettings, false);
  list("optimizer_settings", v.optimizerSettings, false);
  list("optimizers", v.optimizers, true);
  os << "}\n";
}
