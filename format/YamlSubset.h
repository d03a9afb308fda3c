//===- YamlSubset.h - The YAML the cluster presets use, without yaml-cpp --===//
/// \file
/// A reader for the part of YAML that cluster files are written in, so that
/// format/ClusterReader (the profiler's `--base`) reads presets on hosts
/// without yaml-cpp: block mappings and block sequences by indentation, one-line
/// flow mappings and flow sequences (nested), plain, single- and
/// double-quoted scalars, `#` comments, an optional leading `---`. Anything
/// else (anchors, aliases, tags, block scalars `|` `>`, flow collections
/// over several lines, several documents) is an error naming the line, not
/// a silent misreading. Scalars keep their text; the caller converts them.
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace mist {

struct YamlNode {
  enum class Kind { Scalar, Map, Seq };
  Kind kind = Kind::Scalar;
  std::string text;    ///< a scalar's value (quotes removed, escapes applied)
  bool quoted = false; ///< a quoted scalar (never a number or boolean)
  std::vector<std::pair<std::string, YamlNode>> map; ///< in file order
  std::vector<YamlNode> seq;
  int line = 0; ///< 1-based line where the node starts

  /// The value of `key` in a mapping, or null.
  const YamlNode *get(const std::string &key) const;
};

/// Parses `text`; on failure returns false with `error` = "line N: what".
bool parseYamlSubset(const std::string &text, YamlNode &root, std::string &error);

} // namespace mist
