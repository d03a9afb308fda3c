//===- YamlReader.h - Checked, located reads of YAML documents ------------===//
/// \file
/// What the cluster and plan loaders share: parsing a source buffer with
/// yaml-cpp (whose exceptions never leave this layer), mapping yaml-cpp marks
/// to SMLocs in the buffer so every error reads `file:line:col: error: ...`,
/// and typed reads of mapping values that check the type, the range, the
/// key set (unknown keys are errors, with a "did you mean" when one is
/// close) and duplicate keys.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/ClosestMatch.h"
#include "format/ValueRange.h"
#include "support/Diagnostics.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include <optional>
#include <string>
#include <vector>
#include <yaml-cpp/yaml.h>

namespace mist {

class YamlReader {
public:
  YamlReader(unsigned bufferId, DiagnosticEngine &diag) : bufferId(bufferId), diag(diag) {}

  /// Parses the buffer as exactly one YAML document whose top level is a
  /// mapping; nullopt after reporting a syntax error.
  std::optional<YAML::Node> parseTopMapping(llvm::StringRef what);

  /// Where a node starts; `fallback` for nodes without a position (null
  /// values, whose yaml-cpp mark is that of the next token).
  llvm::SMLoc loc(const YAML::Node &n, llvm::SMLoc fallback = {}) const;
  llvm::SMLoc loc(const YAML::Mark &m) const;
  llvm::SMLoc bufferStart() const;

  void error(llvm::SMLoc at, const llvm::Twine &msg) { diag.error(at, msg); }
  DiagnosticEngine &diagnostics() { return diag; }

  /// Scalar conversions; `what` names the value in messages, e.g. "'dp'".
  /// Each reports an error at `at` and returns false on failure.
  bool toInt(const YAML::Node &n, llvm::SMLoc at, const llvm::Twine &what, int &out,
             Range range = Range::Any);
  bool toReal(const YAML::Node &n, llvm::SMLoc at, const llvm::Twine &what, double &out,
              Range range = Range::Any);
  bool toBool(const YAML::Node &n, llvm::SMLoc at, const llvm::Twine &what, bool &out);
  bool toString(const YAML::Node &n, llvm::SMLoc at, const llvm::Twine &what, std::string &out);

private:
  bool checkRange(double v, llvm::SMLoc at, const llvm::Twine &what, Range range);

  unsigned bufferId;
  DiagnosticEngine &diag;
};

/// A mapping whose keys are checked against a fixed set when it is made.
class YamlMap {
public:
  /// `context` names the mapping in messages ("device", "stage 2"); `at`
  /// locates it when the node itself has no position.
  YamlMap(YamlReader &r, const YAML::Node &node, llvm::StringRef context,
          llvm::ArrayRef<llvm::StringRef> keys, llvm::SMLoc at = {});

  /// False when the node is not a mapping (reported).
  bool valid() const { return isMap; }
  llvm::SMLoc loc() const { return where; }

  /// The value of `key`; reports a missing required key.
  std::optional<YAML::Node> get(llvm::StringRef key, Need need);
  bool has(llvm::StringRef key) const { return find(key) != nullptr; }
  /// Where the value of `key` starts (the key's position for null values,
  /// the mapping's when the key is absent).
  llvm::SMLoc valueLoc(llvm::StringRef key) const;
  llvm::SMLoc keyLoc(llvm::StringRef key) const;

  /// Typed reads: false after an error; an absent optional key leaves `out`
  /// unchanged and succeeds.
  bool getInt(llvm::StringRef key, int &out, Need need, Range range = Range::Any);
  bool getReal(llvm::StringRef key, double &out, Need need, Range range = Range::Any);
  bool getBool(llvm::StringRef key, bool &out, Need need);
  bool getString(llvm::StringRef key, std::string &out, Need need);

private:
  struct Entry {
    std::string key;
    YAML::Node keyNode, value;
    llvm::SMLoc keyAt;
  };
  const Entry *find(llvm::StringRef key) const;

  YamlReader &r;
  std::string context;
  llvm::SMLoc where;
  bool isMap = false;
  std::vector<Entry> entries;
};

/// format/ClosestMatch's "did you mean" for LLVM strings.
inline std::optional<std::string> closestMatch(llvm::StringRef word,
                                               llvm::ArrayRef<llvm::StringRef> candidates) {
  std::vector<std::string_view> names;
  for (llvm::StringRef c : candidates)
    names.emplace_back(c.data(), c.size());
  return closestMatch(std::string_view(word.data(), word.size()), names);
}

} // namespace mist
