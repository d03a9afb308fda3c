//===- YamlFields.cpp - Checked, located reads of YamlSubset nodes --------===//
#include "format/YamlFields.h"

#include "format/ClosestMatch.h"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>

namespace mist {

namespace {

bool checkRange(YamlProblems &p, const YamlNode &n, const std::string &what, double v,
                Range range) {
  if (const char *problem = rangeProblem(v, range)) {
    p.at(n, what + " " + problem);
    return false;
  }
  return true;
}

} // namespace

bool yamlInt(YamlProblems &p, const YamlNode &n, const std::string &what, int &out, Range range) {
  const std::string &s = n.text;
  bool digits =
      n.plain() && !s.empty() &&
      s.find_first_not_of("0123456789", s[0] == '-' || s[0] == '+' ? 1 : 0) == std::string::npos &&
      s.size() > (s[0] == '-' || s[0] == '+' ? 1u : 0u);
  if (!digits) {
    p.at(n, "expected an integer for " + what + ", found " + describeYaml(n));
    return false;
  }
  errno = 0;
  long long v = std::strtoll(s.c_str(), nullptr, 10);
  if (errno == ERANGE || v < INT_MIN || v > INT_MAX) {
    p.at(n, what + " is out of range");
    return false;
  }
  if (!checkRange(p, n, what, double(v), range))
    return false;
  out = static_cast<int>(v);
  return true;
}

bool yamlReal(YamlProblems &p, const YamlNode &n, const std::string &what, double &out,
              Range range) {
  const std::optional<double> v = n.plain() ? scalarReal(n.text) : std::nullopt;
  if (!v) {
    p.at(n, "expected a number for " + what + ", found " + describeYaml(n));
    return false;
  }
  if (!std::isfinite(*v)) {
    p.at(n, what + " is out of range");
    return false;
  }
  if (!checkRange(p, n, what, *v, range))
    return false;
  out = *v;
  return true;
}

bool yamlBool(YamlProblems &p, const YamlNode &n, const std::string &what, bool &out) {
  if (const std::optional<bool> b = n.plain() ? scalarBool(n.text) : std::nullopt) {
    out = *b;
    return true;
  }
  p.at(n, "expected true or false for " + what + ", found " + describeYaml(n));
  return false;
}

bool yamlString(YamlProblems &p, const YamlNode &n, const std::string &what, std::string &out) {
  if (n.kind != YamlNode::Kind::Scalar || n.null) {
    p.at(n, "expected a string for " + what + ", found " + describeYaml(n));
    return false;
  }
  out = n.text;
  return true;
}

YamlFields::YamlFields(YamlProblems &p, const YamlNode &node, std::string context,
                       const std::vector<std::string_view> &keys)
    : problems(p), node(node), context(std::move(context)) {
  if (node.kind != YamlNode::Kind::Map) {
    p.at(node, "expected a mapping for '" + this->context + "', found " + describeYaml(node));
    return;
  }
  isMap = true;
  for (const YamlEntry &e : node.map) {
    bool known = false;
    for (std::string_view k : keys)
      known |= k == e.key;
    if (!known) {
      std::string msg = "unknown key '" + e.key + "' in '" + this->context + "'";
      if (auto close = closestMatch(e.key, keys))
        msg += "; did you mean '" + *close + "'?";
      p.at(e.line, e.column, msg);
      continue;
    }
    entries.push_back(&e);
  }
}

const YamlEntry *YamlFields::find(const std::string &key) const {
  for (const YamlEntry *e : entries)
    if (e->key == key)
      return e;
  return nullptr;
}

const YamlNode *YamlFields::get(const std::string &key, Need need) {
  if (!isMap)
    return nullptr;
  if (const YamlEntry *e = find(key))
    return &e->value;
  if (need == Need::Required)
    problems.at(node, "missing key '" + key + "' in '" + context + "'");
  return nullptr;
}

YamlNode YamlFields::keyPlace(const std::string &key) const {
  YamlNode at;
  const YamlEntry *e = find(key);
  at.line = e ? e->line : node.line;
  at.column = e ? e->column : node.column;
  return at;
}

YamlNode YamlFields::valuePlace(const std::string &key) const {
  const YamlEntry *e = find(key);
  if (!e || e->value.null)
    return keyPlace(key);
  YamlNode at;
  at.line = e->value.line;
  at.column = e->value.column;
  return at;
}

namespace {

/// The value to convert: the entry's, or (for "key:" with nothing) a null
/// value placed at its key, kept in `storage`, so the message points at the key.
const YamlNode &placedValue(const YamlNode &v, const YamlNode &place, YamlNode &storage) {
  if (!v.null)
    return v;
  storage.null = true;
  storage.line = place.line;
  storage.column = place.column;
  return storage;
}

} // namespace

bool YamlFields::getInt(const std::string &key, int &out, Need need, Range range) {
  const YamlNode *v = get(key, need);
  if (!v)
    return need == Need::Optional && isMap;
  YamlNode storage;
  return yamlInt(problems, placedValue(*v, valuePlace(key), storage), "'" + key + "'", out, range);
}

bool YamlFields::getReal(const std::string &key, double &out, Need need, Range range) {
  const YamlNode *v = get(key, need);
  if (!v)
    return need == Need::Optional && isMap;
  YamlNode storage;
  return yamlReal(problems, placedValue(*v, valuePlace(key), storage), "'" + key + "'", out, range);
}

bool YamlFields::getBool(const std::string &key, bool &out, Need need) {
  const YamlNode *v = get(key, need);
  if (!v)
    return need == Need::Optional && isMap;
  YamlNode storage;
  return yamlBool(problems, placedValue(*v, valuePlace(key), storage), "'" + key + "'", out);
}

bool YamlFields::getString(const std::string &key, std::string &out, Need need) {
  const YamlNode *v = get(key, need);
  if (!v)
    return need == Need::Optional && isMap;
  YamlNode storage;
  return yamlString(problems, placedValue(*v, valuePlace(key), storage), "'" + key + "'", out);
}

} // namespace mist
