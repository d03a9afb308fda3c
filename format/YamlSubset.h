//===- YamlSubset.h - The YAML that cluster files are written in -----------===//
/// \file
/// A reader for the part of YAML that cluster files are written in, in
/// standard C++ only, so that the one cluster-file reader
/// (format/ClusterReader.h) serves the compiler and the profiler on hosts
/// without yaml-cpp: block mappings and block sequences by indentation,
/// one-line flow mappings and flow sequences (nested), plain, single- and
/// double-quoted scalars, `#` comments, an optional leading `---`. Anything
/// else (anchors, aliases, tags, block scalars `|` `>`, flow collections
/// over several lines, several documents, nesting deeper than 64 levels) is
/// an error at its line and column, not a silent misreading. Scalars keep
/// their text; the caller converts them.
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

namespace mist {

/// A problem in a text file at a 1-based line and column (0 when the
/// problem has no place in the file, e.g. a command-line override).
struct TextProblem {
  int line = 0;
  int column = 0;
  std::string message;
};

struct YamlEntry;

struct YamlNode {
  enum class Kind { Scalar, Map, Seq };
  Kind kind = Kind::Scalar;
  std::string text;           ///< a scalar's value (quotes removed, escapes applied)
  bool quoted = false;        ///< a quoted scalar (never a number or boolean)
  bool null = false;          ///< "key:" with no value
  std::vector<YamlEntry> map; ///< in file order
  std::vector<YamlNode> seq;
  int line = 0;   ///< 1-based line where the node starts
  int column = 0; ///< 1-based column where the node starts

  /// The value of `key` in a mapping, or null.
  const YamlNode *get(const std::string &key) const;
  /// A scalar that may be read as a number or a boolean.
  bool plain() const { return kind == Kind::Scalar && !quoted && !null; }
};

struct YamlEntry {
  std::string key;
  int line = 0, column = 0; ///< where the key starts
  YamlNode value;
};

/// How `n` reads in a message: 'text' for a scalar, else "nothing", "a
/// mapping" or "a sequence".
std::string describeYaml(const YamlNode &n);

/// The deepest nesting of flow and block collections the reader accepts.
constexpr int maxYamlNesting = 64;

/// Parses `text`; on failure returns false with the problem's place.
bool parseYamlSubset(const std::string &text, YamlNode &root, TextProblem &problem);

} // namespace mist
