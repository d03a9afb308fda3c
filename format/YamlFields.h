//===- YamlFields.h - Checked, located reads of YamlSubset nodes ----------===//
/// \file
/// Typed reads of the values of a YAML mapping (format/YamlSubset.h) that
/// check the type, the range (format/ValueRange.h), the key set (unknown
/// keys are problems, with a "did you mean" when one is close) and report
/// every problem at its line and column. Problems are collected, not
/// thrown, so one pass over a file reports all of them.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/ValueRange.h"
#include "format/YamlSubset.h"

#include <string>
#include <string_view>
#include <vector>

namespace mist {

/// Where problems go.
class YamlProblems {
public:
  void at(int line, int column, const std::string &message) {
    list.push_back({line, column, message});
  }
  void at(const YamlNode &n, const std::string &message) { at(n.line, n.column, message); }
  size_t count() const { return list.size(); }
  const std::vector<TextProblem> &all() const { return list; }

private:
  std::vector<TextProblem> list;
};

/// Scalar conversions; `what` names the value in messages ("'nodes'"). Each
/// reports a problem at `n` and returns false on failure.
bool yamlInt(YamlProblems &p, const YamlNode &n, const std::string &what, int &out,
             Range range = Range::Any);
bool yamlReal(YamlProblems &p, const YamlNode &n, const std::string &what, double &out,
              Range range = Range::Any);
bool yamlBool(YamlProblems &p, const YamlNode &n, const std::string &what, bool &out);
bool yamlString(YamlProblems &p, const YamlNode &n, const std::string &what, std::string &out);

/// A mapping whose keys are checked against a fixed set when it is made.
class YamlFields {
public:
  /// `context` names the mapping in messages ("device", "collectives").
  YamlFields(YamlProblems &p, const YamlNode &node, std::string context,
             const std::vector<std::string_view> &keys);

  /// False when the node is not a mapping (reported).
  bool valid() const { return isMap; }
  bool has(const std::string &key) const { return find(key) != nullptr; }
  /// The value of `key`, or null (a problem if `need` is Required).
  const YamlNode *get(const std::string &key, Need need);

  /// Where the mapping, a key and a value start (a value without text, as
  /// in "key:", is placed at its key).
  const YamlNode &place() const { return node; }
  YamlNode keyPlace(const std::string &key) const;
  YamlNode valuePlace(const std::string &key) const;

  /// Typed reads of an entry; false when it is missing and required, or bad.
  /// An optional entry that is absent leaves `out` alone and returns true.
  bool getInt(const std::string &key, int &out, Need need, Range range = Range::Any);
  bool getReal(const std::string &key, double &out, Need need, Range range = Range::Any);
  bool getBool(const std::string &key, bool &out, Need need);
  bool getString(const std::string &key, std::string &out, Need need);

private:
  const YamlEntry *find(const std::string &key) const;

  YamlProblems &problems;
  const YamlNode &node;
  std::string context;
  bool isMap = false;
  std::vector<const YamlEntry *> entries; ///< the known keys, in file order
};

} // namespace mist
