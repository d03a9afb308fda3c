//===- YamlSubset.cpp - The YAML that cluster files are written in ---------===//
#include "format/YamlSubset.h"

namespace mist {

const YamlNode *YamlNode::get(const std::string &key) const {
  for (const YamlEntry &e : map)
    if (e.key == key)
      return &e.value;
  return nullptr;
}

std::string describeYaml(const YamlNode &n) {
  if (n.kind == YamlNode::Kind::Map)
    return "a mapping";
  if (n.kind == YamlNode::Kind::Seq)
    return "a sequence";
  if (n.null)
    return "nothing";
  std::string s = n.text;
  if (s.size() > 40) {
    s.resize(37);
    s += "...";
  }
  return "'" + s + "'";
}

namespace {

struct Line {
  int number;          ///< 1-based
  int indent;          ///< leading spaces; the content starts at column indent + 1
  std::string content; ///< without indentation and comment, right-trimmed
};

/// Thrown inside the parser, caught once at its entry.
struct Failure {
  TextProblem problem;
};

[[noreturn]] void fail(int line, int column, const std::string &what) {
  throw Failure{{line, column, what}};
}

std::string trimRight(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.pop_back();
  return s;
}

/// Removes a `#` comment (one at the start or after a blank, outside quotes).
std::string stripComment(const std::string &s) {
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (quote) {
      if (c == '\\' && quote == '"')
        ++i;
      else if (c == quote)
        quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#' && (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t')) {
      return s.substr(0, i);
    }
  }
  return s;
}

int hexDigit(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/// "key: rest" split at its colon: the key's text and where `rest` starts.
struct KeySplit {
  std::string key;
  bool quotedKey = false;
  size_t restAt = 0; ///< offset of the value in the line's content
};

/// One-line flow values: scalars, {...}, [...]; `column` is where `s` starts.
class FlowParser {
public:
  FlowParser(const std::string &s, int line, int column) : s(s), line(line), column(column) {}

  /// The whole of `s` as one value at nesting `depth`.
  YamlNode parseWhole(int depth) {
    YamlNode n = value(/*inFlow=*/false, depth);
    skipSpace();
    if (pos != s.size())
      failHere("unexpected text after a value: '" + s.substr(pos) + "'");
    return n;
  }

  /// The key of a block mapping line ("key: ..." or "key:"), if it is one.
  static bool splitKey(const std::string &s, int line, int column, KeySplit &out) {
    size_t i = 0;
    out.quotedKey = false;
    if (!s.empty() && (s[0] == '"' || s[0] == '\'')) {
      char q = s[0];
      size_t end = 1;
      while (end < s.size() && s[end] != q)
        end += s[end] == '\\' && q == '"' ? 2 : 1;
      if (end >= s.size())
        return false;
      i = end + 1;
      out.quotedKey = true;
      if (i >= s.size() || s[i] != ':' || (i + 1 < s.size() && s[i + 1] != ' '))
        return false;
      const std::string quotedKey = s.substr(0, i);
      out.key = FlowParser(quotedKey, line, column).value(false, 0).text;
    } else {
      if (!s.empty() && (s[0] == '{' || s[0] == '['))
        return false;
      while (i < s.size() && !(s[i] == ':' && (i + 1 == s.size() || s[i + 1] == ' ')))
        ++i;
      if (i >= s.size())
        return false;
      out.key = trimRight(s.substr(0, i));
    }
    size_t b = s.find_first_not_of(' ', i + 1);
    out.restAt = b == std::string::npos ? s.size() : b;
    return true;
  }

private:
  [[noreturn]] void failAt(size_t at, const std::string &what) const {
    fail(line, column + static_cast<int>(at), what);
  }
  [[noreturn]] void failHere(const std::string &what) const { failAt(pos, what); }

  void skipSpace() {
    while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t'))
      ++pos;
  }

  YamlNode node() const {
    YamlNode n;
    n.line = line;
    n.column = column + static_cast<int>(pos);
    return n;
  }

  YamlNode value(bool inFlow, int depth) {
    skipSpace();
    YamlNode n = node();
    if (pos >= s.size()) {
      if (inFlow)
        failHere("missing value at the end of the line (flow collections must fit on one line)");
      n.null = true;
      return n;
    }
    char c = s[pos];
    if (c == '{' || c == '[') {
      if (depth > maxYamlNesting)
        failHere("the YAML nests more than " + std::to_string(maxYamlNesting) +
                 " levels deep here");
      return c == '{' ? mapping(depth) : sequence(depth);
    }
    if (c == '"' || c == '\'')
      return quoted();
    if (c == '&' || c == '*')
      failHere("YAML anchors and aliases ('&name', '*name') are not allowed: an alias repeats "
               "a whole subtree, so a few lines can stand for billions of values");
    if (c == '!')
      failHere("YAML tags ('!') are not read here: write the value alone");
    if (c == '|' || c == '>')
      failHere("block scalars ('|', '>') are not read here: write the value on one line");
    if (c == '%' || c == '@' || c == '`')
      failHere(std::string("'") + c + "' cannot start a plain value: quote it");
    if (inFlow && (c == ',' || c == '}' || c == ']'))
      failHere("missing value");
    size_t start = pos;
    while (pos < s.size()) {
      char d = s[pos];
      if (inFlow && (d == ',' || d == '}' || d == ']'))
        break;
      if (inFlow && d == ':' && (pos + 1 == s.size() || s[pos + 1] == ' '))
        break;
      ++pos;
    }
    n.text = trimRight(s.substr(start, pos - start));
    return n;
  }

  YamlNode quoted() {
    YamlNode n = node();
    n.quoted = true;
    const size_t open = pos;
    char q = s[pos++];
    while (true) {
      if (pos >= s.size())
        failAt(open, "this quoted value is not closed on its line: a closing quote is probably "
                     "missing");
      char c = s[pos++];
      if (q == '\'' && c == '\'') {
        if (pos < s.size() && s[pos] == '\'') {
          n.text += '\'';
          ++pos;
          continue;
        }
        break;
      }
      if (q == '"' && c == '"')
        break;
      if (q == '"' && c == '\\') {
        n.text += escape();
        continue;
      }
      n.text += c;
    }
    return n;
  }

  /// The character a backslash escape stands for (`pos` after the backslash).
  char escape() {
    if (pos >= s.size())
      failHere("unterminated escape");
    char e = s[pos++];
    switch (e) {
    case 'n':
      return '\n';
    case 't':
      return '\t';
    case '\\':
    case '"':
    case '/':
      return e;
    case '0':
      return '\0';
    case 'x': {
      int hi = pos + 2 <= s.size() ? hexDigit(s[pos]) : -1;
      int lo = pos + 2 <= s.size() ? hexDigit(s[pos + 1]) : -1;
      if (hi < 0 || lo < 0)
        failAt(pos - 2, "a \\x escape needs two hexadecimal digits");
      pos += 2;
      return static_cast<char>(hi * 16 + lo);
    }
    default:
      failAt(pos - 2, std::string("unsupported escape \\") + e);
    }
  }

  YamlNode mapping(int depth) {
    YamlNode n = node();
    n.kind = YamlNode::Kind::Map;
    ++pos; // '{'
    skipSpace();
    if (pos < s.size() && s[pos] == '}') {
      ++pos;
      return n;
    }
    while (true) {
      skipSpace();
      const size_t keyAt = pos;
      YamlNode key = value(true, depth + 1);
      if (key.kind != YamlNode::Kind::Scalar)
        failAt(keyAt, "a mapping key must be a scalar");
      for (const YamlEntry &e : n.map)
        if (e.key == key.text)
          failAt(keyAt, "duplicate key '" + key.text + "'");
      skipSpace();
      if (pos >= s.size() || s[pos] != ':')
        failHere("expected ':' after key '" + key.text + "'");
      ++pos;
      YamlNode v = value(true, depth + 1);
      n.map.push_back({key.text, key.line, key.column, std::move(v)});
      if (closes('}', "a flow mapping"))
        return n;
    }
  }

  YamlNode sequence(int depth) {
    YamlNode n = node();
    n.kind = YamlNode::Kind::Seq;
    ++pos; // '['
    skipSpace();
    if (pos < s.size() && s[pos] == ']') {
      ++pos;
      return n;
    }
    while (true) {
      n.seq.push_back(value(true, depth + 1));
      if (closes(']', "a flow sequence"))
        return n;
    }
  }

  /// After an item: true at the closing bracket, false at a comma.
  bool closes(char close, const char *what) {
    skipSpace();
    if (pos < s.size() && s[pos] == ',') {
      ++pos;
      return false;
    }
    if (pos < s.size() && s[pos] == close) {
      ++pos;
      return true;
    }
    failHere(std::string("expected ',' or '") + close + "' in " + what +
             (pos >= s.size() ? " (flow collections must fit on one line)" : ""));
  }

  const std::string &s;
  int line, column;
  size_t pos = 0;
};

class BlockParser {
public:
  explicit BlockParser(std::vector<Line> lines) : lines(std::move(lines)) {}

  YamlNode document() {
    if (lines.empty()) {
      YamlNode n;
      n.null = true;
      n.line = n.column = 1;
      return n;
    }
    YamlNode n = block(lines[0].indent, 0);
    if (i < lines.size())
      fail(lines[i].number, lines[i].indent + 1,
           "unexpected indentation or a second top-level value");
    return n;
  }

private:
  static bool isSeqItem(const std::string &c) {
    return c == "-" || (c.size() >= 2 && c[0] == '-' && c[1] == ' ');
  }
  static int columnOf(const Line &l) { return l.indent + 1; }

  YamlNode block(int indent, int depth) {
    const Line &l = lines[i];
    KeySplit split;
    if (isSeqItem(l.content) || FlowParser::splitKey(l.content, l.number, columnOf(l), split)) {
      if (depth > maxYamlNesting)
        fail(l.number, columnOf(l),
             "the YAML nests more than " + std::to_string(maxYamlNesting) + " levels deep here");
      return isSeqItem(l.content) ? seq(indent, depth) : map(indent, depth);
    }
    YamlNode n = FlowParser(l.content, l.number, columnOf(l)).parseWhole(depth);
    ++i;
    return n;
  }

  /// The value after "key:" or "-" when it is on the next lines.
  YamlNode nested(int parentIndent, const Line &at, int depth, bool allowSameIndentSeq) {
    if (i < lines.size() &&
        (lines[i].indent > parentIndent ||
         (allowSameIndentSeq && lines[i].indent == parentIndent && isSeqItem(lines[i].content))))
      return block(lines[i].indent, depth);
    YamlNode empty; // "key:" with nothing: a null value, placed at the line's end
    empty.null = true;
    empty.line = at.number;
    empty.column = columnOf(at) + static_cast<int>(at.content.size());
    return empty;
  }

  YamlNode map(int indent, int depth) {
    YamlNode n;
    n.kind = YamlNode::Kind::Map;
    n.line = lines[i].number;
    n.column = columnOf(lines[i]);
    while (i < lines.size() && lines[i].indent == indent && !isSeqItem(lines[i].content)) {
      const Line l = lines[i];
      KeySplit split;
      if (!FlowParser::splitKey(l.content, l.number, columnOf(l), split))
        fail(l.number, columnOf(l), "expected 'key: value'");
      for (const YamlEntry &e : n.map)
        if (e.key == split.key)
          fail(l.number, columnOf(l), "duplicate key '" + split.key + "'");
      ++i;
      std::string rest = l.content.substr(split.restAt);
      YamlNode v =
          rest.empty()
              ? nested(indent, l, depth + 1, true)
              : FlowParser(rest, l.number, columnOf(l) + int(split.restAt)).parseWhole(depth + 1);
      n.map.push_back({split.key, l.number, columnOf(l), std::move(v)});
    }
    if (i < lines.size() && lines[i].indent > indent)
      fail(lines[i].number, columnOf(lines[i]), "unexpected indentation");
    return n;
  }

  YamlNode seq(int indent, int depth) {
    YamlNode n;
    n.kind = YamlNode::Kind::Seq;
    n.line = lines[i].number;
    n.column = columnOf(lines[i]);
    while (i < lines.size() && lines[i].indent == indent && isSeqItem(lines[i].content)) {
      const Line l = lines[i];
      std::string rest = l.content.size() > 1 ? l.content.substr(2) : "";
      size_t b = rest.find_first_not_of(' ');
      int offset = 2 + static_cast<int>(b == std::string::npos ? 0 : b);
      rest = b == std::string::npos ? "" : rest.substr(b);
      if (rest.empty()) {
        ++i;
        n.seq.push_back(nested(indent, l, depth + 1, false));
        continue;
      }
      KeySplit split;
      if (isSeqItem(rest) || FlowParser::splitKey(rest, l.number, columnOf(l) + offset, split)) {
        // "- key: value" (a block mapping) or "- - x": the item continues
        // at the column after the dash.
        lines[i].indent = indent + offset;
        lines[i].content = rest;
        n.seq.push_back(block(indent + offset, depth + 1));
        continue;
      }
      ++i;
      n.seq.push_back(FlowParser(rest, l.number, columnOf(l) + offset).parseWhole(depth + 1));
    }
    if (i < lines.size() && lines[i].indent > indent)
      fail(lines[i].number, columnOf(lines[i]), "unexpected indentation");
    return n;
  }

  std::vector<Line> lines;
  size_t i = 0;
};

} // namespace

bool parseYamlSubset(const std::string &text, YamlNode &root, TextProblem &problem) {
  std::vector<Line> lines;
  size_t start = 0;
  int number = 0;
  bool sawContent = false;
  int secondDocumentAt = 0; ///< the line of a `---` after content
  try {
    while (start <= text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos)
        end = text.size();
      std::string raw = text.substr(start, end - start);
      start = end + 1;
      ++number;
      if (raw.find('\0') != std::string::npos)
        fail(number, int(raw.find('\0')) + 1, "a NUL byte: this is not a text file");
      std::string s = trimRight(stripComment(raw));
      size_t indent = s.find_first_not_of(' ');
      if (indent == std::string::npos)
        continue;
      if (s[indent] == '\t')
        fail(number, int(indent) + 1, "tabs are not allowed for indentation");
      std::string content = s.substr(indent);
      if (indent == 0 && (content == "---" || content.rfind("--- ", 0) == 0)) {
        if (content != "---")
          fail(number, 5, "write the document's content on the lines after '---'");
        if (sawContent && !secondDocumentAt)
          secondDocumentAt = number;
        continue;
      }
      if (indent == 0 && content == "...")
        break;
      // An empty second document is harmless; one with content is not read.
      if (secondDocumentAt)
        fail(secondDocumentAt, 1, "a file holds one YAML document, found a second");
      sawContent = true;
      lines.push_back({number, static_cast<int>(indent), content});
      if (end == text.size())
        break;
    }
    root = BlockParser(std::move(lines)).document();
  } catch (const Failure &f) {
    problem = f.problem;
    return false;
  }
  return true;
}

} // namespace mist
