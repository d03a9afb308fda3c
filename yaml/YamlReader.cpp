//===- YamlReader.cpp - Checked, located reads of YAML documents ----------===//
#include "yaml/YamlReader.h"

#include <climits>
#include <cmath>
#include <cstdlib>

using namespace mist;

namespace {

/// How a value that has the wrong type reads in a message.
std::string describe(const YAML::Node &n) {
  switch (n.Type()) {
  case YAML::NodeType::Null:
  case YAML::NodeType::Undefined:
    return "nothing";
  case YAML::NodeType::Sequence:
    return "a sequence";
  case YAML::NodeType::Map:
    return "a mapping";
  case YAML::NodeType::Scalar:
    break;
  }
  std::string s = n.Scalar();
  if (s.size() > 40) { // in place: GCC 12 warned (-Warray-bounds) on substr() + "..."
    s.resize(37);
    s += "...";
  }
  return "'" + s + "'";
}

/// Plain (unquoted, untagged) scalars are the only ones read as numbers or
/// booleans: "8" in quotes is a string, as YAML has it.
bool isPlainScalar(const YAML::Node &n) { return n.IsScalar() && n.Tag() == "?"; }

} // namespace

//===----------------------------------------------------------------------===//
// YamlReader
//===----------------------------------------------------------------------===//

llvm::SMLoc YamlReader::bufferStart() const {
  return llvm::SMLoc::getFromPointer(diag.sourceMgr().getMemoryBuffer(bufferId)->getBufferStart());
}

llvm::SMLoc YamlReader::loc(const YAML::Mark &m) const {
  if (m.is_null() || m.line < 0 || m.column < 0)
    return bufferStart();
  llvm::SMLoc l = diag.sourceMgr().FindLocForLineAndColumn(bufferId, m.line + 1, m.column + 1);
  return l.isValid() ? l : bufferStart();
}

llvm::SMLoc YamlReader::loc(const YAML::Node &n, llvm::SMLoc fallback) const {
  if ((n.IsNull() || !n.IsDefined()) && fallback.isValid())
    return fallback;
  return loc(n.Mark());
}

namespace {

/// The offset of the first column-0 document marker (`---`) that starts a
/// second document with content, or npos. YAML forbids `---` at column 0
/// inside scalars, so such a line always starts a document. (yaml-cpp 0.7's
/// LoadAll can loop forever on some malformed input, so the documents after
/// the first are found here instead of parsed.)
size_t secondDocument(llvm::StringRef text) {
  bool content = false, inSecond = false;
  size_t secondAt = llvm::StringRef::npos;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find('\n', pos);
    llvm::StringRef line = text.slice(pos, end == llvm::StringRef::npos ? text.size() : end);
    bool marker = line == "---" || line.startswith("--- ") || line.startswith("---\t");
    llvm::StringRef rest = marker ? line.drop_front(3).ltrim() : line.ltrim();
    bool meaningful = !rest.empty() && !rest.startswith("#") && line != "...";
    if (marker && content && !inSecond) {
      inSecond = true;
      secondAt = pos;
    }
    if (meaningful) {
      if (inSecond)
        return secondAt;
      content = true;
    }
    if (end == llvm::StringRef::npos)
      break;
    pos = end + 1;
  }
  return llvm::StringRef::npos;
}

/// Plan and cluster files nest a few levels; deeper input is refused before
/// yaml-cpp sees it (it reports only "bad file" for deep flow nesting).
constexpr unsigned maxNesting = 64;

/// The closing quote of the quoted text opening at `at` (a `"` string
/// knows backslash escapes, a `'` string does not), or npos; `sameLine`
/// stops the search at the line's end.
size_t closingQuote(llvm::StringRef text, size_t at, bool sameLine) {
  const char quote = text[at];
  for (size_t i = at + 1; i < text.size(); ++i) {
    if (sameLine && text[i] == '\n')
      break;
    if (quote == '"' && text[i] == '\\')
      ++i;
    else if (text[i] == quote)
      return i;
  }
  return llvm::StringRef::npos;
}

/// Where flow collections ([ and {) or block indentation first nest deeper
/// than maxNesting, skipping quoted text and comments; npos if nowhere.
size_t tooDeep(llvm::StringRef text) {
  unsigned depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    if (ch == '#' && (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\n'))
      i = std::min(text.find('\n', i), text.size()) - 1;
    else if (ch == '"' || ch == '\'') {
      i = closingQuote(text, i, /*sameLine=*/false);
      if (i == llvm::StringRef::npos)
        break;
    } else if ((ch == '[' || ch == '{') && ++depth > maxNesting)
      return i;
    else if ((ch == ']' || ch == '}') && depth > 0)
      --depth;
    else if (ch == '\n' &&
             text.substr(i + 1).take_while([](char c) { return c == ' '; }).size() > 2 * maxNesting)
      return i + 1;
  }
  return llvm::StringRef::npos;
}

/// The first anchor (`&name`) or alias (`*name`) outside quoted text and
/// comments, or npos. Plan and cluster files need neither, and an alias
/// repeats a whole subtree: nested aliases make a file of a few lines stand
/// for billions of nodes (a "billion laughs"), which every walk then visits.
size_t firstAnchorOrAlias(llvm::StringRef text) {
  for (size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    if (ch == '#' && (i == 0 || text[i - 1] == ' ' || text[i - 1] == '\n')) {
      i = std::min(text.find('\n', i), text.size()) - 1;
    } else if (ch == '"' || ch == '\'') {
      i = closingQuote(text, i, /*sameLine=*/false);
      if (i == llvm::StringRef::npos)
        break;
    } else if ((ch == '&' || ch == '*') && i + 1 < text.size() &&
               !llvm::StringRef(" \t\r\n,]}").contains(text[i + 1]) &&
               (i == 0 || llvm::StringRef(" \t\n[{,").contains(text[i - 1]))) {
      return i;
    }
  }
  return llvm::StringRef::npos;
}

/// Whether the quoted scalar opening at `at` closes on its own line.
bool closesOnItsLine(llvm::StringRef text, size_t at) {
  if (at >= text.size() || (text[at] != '"' && text[at] != '\''))
    return true; // not where a quote opens: nothing to say
  return closingQuote(text, at, /*sameLine=*/true) != llvm::StringRef::npos;
}

/// The first quoted scalar that runs over a line end: in these files, a
/// missing closing quote, which swallows the keys after it (YAML folds the
/// line breaks of a quoted scalar into spaces).
std::optional<YAML::Mark> quotedOverLines(const YAML::Node &n, llvm::StringRef text) {
  if (n.IsScalar())
    return n.Tag() == "!" && n.Mark().pos >= 0 && !closesOnItsLine(text, size_t(n.Mark().pos))
               ? std::optional(n.Mark())
               : std::nullopt;
  if (n.IsSequence() || n.IsMap())
    for (auto it = n.begin(); it != n.end(); ++it) {
      const YAML::Node &v = n.IsMap() ? it->second : *it;
      if (auto m = quotedOverLines(v, text))
        return m;
    }
  return std::nullopt;
}

} // namespace

std::optional<YAML::Node> YamlReader::parseTopMapping(llvm::StringRef what) {
  const llvm::MemoryBuffer *buf = diag.sourceMgr().getMemoryBuffer(bufferId);
  llvm::StringRef text = buf->getBuffer();
  if (size_t second = secondDocument(text); second != llvm::StringRef::npos) {
    diag.error(llvm::SMLoc::getFromPointer(text.data() + second),
               "a " + what.str() + " file holds one YAML document, found a second");
    return std::nullopt;
  }
  if (size_t deep = tooDeep(text); deep != llvm::StringRef::npos) {
    diag.error(llvm::SMLoc::getFromPointer(text.data() + deep),
               "the YAML nests more than " + std::to_string(maxNesting) + " levels deep here");
    return std::nullopt;
  }
  if (size_t at = firstAnchorOrAlias(text); at != llvm::StringRef::npos) {
    diag.error(llvm::SMLoc::getFromPointer(text.data() + at),
               "YAML anchors and aliases ('&name', '*name') are not allowed in a " + what.str() +
                   " file: an alias repeats a whole subtree, so a few lines can stand for "
                   "billions of values");
    return std::nullopt;
  }
  std::vector<YAML::Node> docs;
  try {
    YAML::Node doc = YAML::Load(text.str());
    if (doc.IsDefined() && !doc.IsNull())
      docs.push_back(doc);
    if (auto open = quotedOverLines(doc, text)) {
      diag.error(loc(*open), "this quoted value runs over several lines: a closing quote is "
                             "probably missing");
      return std::nullopt;
    }
  } catch (const YAML::Exception &e) {
    diag.error(loc(e.mark), "invalid YAML: " + e.msg);
    return std::nullopt;
  }
  if (docs.empty() || !docs[0].IsMap()) {
    diag.error(docs.empty() ? bufferStart() : loc(docs[0]),
               "expected a " + what + " (a YAML mapping), found " +
                   (docs.empty() ? std::string("nothing") : describe(docs[0])));
    return std::nullopt;
  }
  return docs[0];
}

bool YamlReader::checkRange(double v, llvm::SMLoc at, const llvm::Twine &what, Range range) {
  if (const char *problem = rangeProblem(v, range)) {
    diag.error(at, what + " " + problem);
    return false;
  }
  return true;
}

bool YamlReader::toInt(const YAML::Node &n, llvm::SMLoc at, const llvm::Twine &what, int &out,
                       Range range) {
  long long v = 0;
  llvm::StringRef s = n.IsScalar() ? llvm::StringRef(n.Scalar()) : llvm::StringRef();
  if (!isPlainScalar(n) || s.getAsInteger(10, v)) {
    diag.error(at, "expected an integer for " + what + ", found " + describe(n));
    return false;
  }
  if (v < INT_MIN || v > INT_MAX) {
    diag.error(at, what + " is out of range");
    return false;
  }
  if (!checkRange(static_cast<double>(v), at, what, range))
    return false;
  out = static_cast<int>(v);
  return true;
}

bool YamlReader::toReal(const YAML::Node &n, llvm::SMLoc at, const llvm::Twine &what, double &out,
                        Range range) {
  const std::optional<double> v = isPlainScalar(n) ? scalarReal(n.Scalar()) : std::nullopt;
  if (!v) {
    diag.error(at, "expected a number for " + what + ", found " + describe(n));
    return false;
  }
  if (!std::isfinite(*v)) {
    diag.error(at, what + " is out of range");
    return false;
  }
  if (!checkRange(*v, at, what, range))
    return false;
  out = *v;
  return true;
}

bool YamlReader::toBool(const YAML::Node &n, llvm::SMLoc at, const llvm::Twine &what, bool &out) {
  if (const std::optional<bool> b = isPlainScalar(n) ? scalarBool(n.Scalar()) : std::nullopt) {
    out = *b;
    return true;
  }
  diag.error(at, "expected true or false for " + what + ", found " + describe(n));
  return false;
}

bool YamlReader::toString(const YAML::Node &n, llvm::SMLoc at, const llvm::Twine &what,
                          std::string &out) {
  if (!n.IsScalar()) {
    diag.error(at, "expected a string for " + what + ", found " + describe(n));
    return false;
  }
  out = n.Scalar();
  return true;
}

//===----------------------------------------------------------------------===//
// YamlMap
//===----------------------------------------------------------------------===//

YamlMap::YamlMap(YamlReader &r, const YAML::Node &node, llvm::StringRef context,
                 llvm::ArrayRef<llvm::StringRef> keys, llvm::SMLoc at)
    : r(r), context(context.str()), where(r.loc(node, at)) {
  if (!node.IsMap()) {
    r.error(where, "expected a mapping for '" + context + "', found " + describe(node));
    return;
  }
  isMap = true;
  for (auto it = node.begin(); it != node.end(); ++it) {
    YAML::Node k = it->first; // a copy: `it->` yields a temporary proxy
    llvm::SMLoc keyAt = r.loc(k, where);
    if (!k.IsScalar()) {
      r.error(keyAt, "expected a key name in '" + context + "', found " + describe(k));
      continue;
    }
    std::string name = k.Scalar();
    if (llvm::find(keys, llvm::StringRef(name)) == keys.end()) {
      std::string msg = "unknown key '" + name + "' in '" + context.str() + "'";
      if (auto close = closestMatch(name, keys))
        msg += "; did you mean '" + *close + "'?";
      r.error(keyAt, msg);
      continue;
    }
    if (find(name)) {
      r.error(keyAt, "duplicate key '" + name + "' in '" + context + "'");
      continue;
    }
    entries.push_back({name, k, it->second, keyAt});
  }
}

const YamlMap::Entry *YamlMap::find(llvm::StringRef key) const {
  for (const Entry &e : entries)
    if (e.key == key)
      return &e;
  return nullptr;
}

std::optional<YAML::Node> YamlMap::get(llvm::StringRef key, Need need) {
  if (!isMap)
    return std::nullopt;
  if (const Entry *e = find(key))
    return e->value;
  if (need == Need::Required)
    r.error(where, "missing key '" + key + "' in '" + context + "'");
  return std::nullopt;
}

llvm::SMLoc YamlMap::keyLoc(llvm::StringRef key) const {
  const Entry *e = find(key);
  return e ? e->keyAt : where;
}

llvm::SMLoc YamlMap::valueLoc(llvm::StringRef key) const {
  const Entry *e = find(key);
  return e ? r.loc(e->value, e->keyAt) : where;
}

bool YamlMap::getInt(llvm::StringRef key, int &out, Need need, Range range) {
  auto v = get(key, need);
  if (!v)
    return need == Need::Optional && isMap;
  return r.toInt(*v, valueLoc(key), "'" + key + "'", out, range);
}

bool YamlMap::getReal(llvm::StringRef key, double &out, Need need, Range range) {
  auto v = get(key, need);
  if (!v)
    return need == Need::Optional && isMap;
  return r.toReal(*v, valueLoc(key), "'" + key + "'", out, range);
}

bool YamlMap::getBool(llvm::StringRef key, bool &out, Need need) {
  auto v = get(key, need);
  if (!v)
    return need == Need::Optional && isMap;
  return r.toBool(*v, valueLoc(key), "'" + key + "'", out);
}

bool YamlMap::getString(llvm::StringRef key, std::string &out, Need need) {
  auto v = get(key, need);
  if (!v)
    return need == Need::Optional && isMap;
  return r.toString(*v, valueLoc(key), "'" + key + "'", out);
}
