//===- YamlSubset.cpp - The YAML the cluster presets use, without yaml-cpp ===//
#include "format/YamlSubset.h"

#include <cctype>
#include <cstdio>

namespace mist {

const YamlNode *YamlNode::get(const std::string &key) const {
  for (const auto &[k, v] : map)
    if (k == key)
      return &v;
  return nullptr;
}

namespace {

struct Line {
  int number;          ///< 1-based
  int indent;          ///< leading spaces
  std::string content; ///< without indentation and comment, right-trimmed
};

struct Failure {
  int line;
  std::string what;
};

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

/// One-line flow values: scalars, {...}, [...].
class FlowParser {
public:
  FlowParser(const std::string &s, int line) : s(s), line(line) {}

  YamlNode parseWhole() {
    YamlNode n = value(/*inFlow=*/false);
    skipSpace();
    if (pos != s.size())
      fail("unexpected text after a value: '" + s.substr(pos) + "'");
    return n;
  }

  /// The key of a block mapping line ("key: ..." or "key:"), or false.
  static bool splitKey(const std::string &s, std::string &key, std::string &rest, bool &quotedKey) {
    size_t i = 0;
    quotedKey = false;
    if (!s.empty() && (s[0] == '"' || s[0] == '\'')) {
      char q = s[0];
      size_t end = 1;
      while (end < s.size() && s[end] != q)
        end += s[end] == '\\' && q == '"' ? 2 : 1;
      if (end >= s.size())
        return false;
      i = end + 1;
      quotedKey = true;
      if (i >= s.size() || s[i] != ':')
        return false;
    } else {
      if (!s.empty() && (s[0] == '{' || s[0] == '['))
        return false;
      while (i < s.size() && !(s[i] == ':' && (i + 1 == s.size() || s[i + 1] == ' ')))
        ++i;
      if (i >= s.size())
        return false;
    }
    key = s.substr(0, i);
    if (quotedKey) {
      FlowParser p(key, 0);
      key = p.value(false).text;
    } else {
      key = trimRight(key);
    }
    rest = s.substr(i + 1);
    size_t b = rest.find_first_not_of(' ');
    rest = b == std::string::npos ? "" : rest.substr(b);
    return true;
  }

private:
  [[noreturn]] void fail(const std::string &what) { throw Failure{line, what}; }

  void skipSpace() {
    while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\t'))
      ++pos;
  }

  YamlNode value(bool inFlow) {
    skipSpace();
    YamlNode n;
    n.line = line;
    if (pos >= s.size()) {
      if (inFlow)
        fail("missing value");
      return n; // empty plain scalar
    }
    char c = s[pos];
    if (c == '{')
      return mapping();
    if (c == '[')
      return sequence();
    if (c == '"' || c == '\'')
      return quoted();
    if (c == '&' || c == '*' || c == '!' || c == '|' || c == '>' || c == '%' || c == '@' ||
        c == '`')
      fail(std::string("unsupported YAML ('") + c + "': anchors, aliases, tags, block scalars)");
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
    YamlNode n;
    n.line = line;
    n.quoted = true;
    char q = s[pos++];
    while (true) {
      if (pos >= s.size())
        fail("unterminated quoted string");
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
        if (pos >= s.size())
          fail("unterminated escape");
        char e = s[pos++];
        switch (e) {
        case 'n':
          n.text += '\n';
          break;
        case 't':
          n.text += '\t';
          break;
        case '\\':
          n.text += '\\';
          break;
        case '"':
          n.text += '"';
          break;
        case '/':
          n.text += '/';
          break;
        case '0':
          n.text += '\0';
          break;
        case 'x': {
          if (pos + 2 > s.size())
            fail("bad \\x escape");
          n.text += static_cast<char>(std::stoi(s.substr(pos, 2), nullptr, 16));
          pos += 2;
          break;
        }
        default:
          fail(std::string("unsupported escape \\") + e);
        }
        continue;
      }
      n.text += c;
    }
    return n;
  }

  YamlNode mapping() {
    YamlNode n;
    n.line = line;
    n.kind = YamlNode::Kind::Map;
    ++pos; // '{'
    skipSpace();
    if (pos < s.size() && s[pos] == '}') {
      ++pos;
      return n;
    }
    while (true) {
      YamlNode key = value(true);
      if (key.kind != YamlNode::Kind::Scalar)
        fail("a mapping key must be a scalar");
      skipSpace();
      if (pos >= s.size() || s[pos] != ':')
        fail("expected ':' after key '" + key.text + "'");
      ++pos;
      YamlNode v = value(true);
      n.map.emplace_back(key.text, std::move(v));
      skipSpace();
      if (pos < s.size() && s[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < s.size() && s[pos] == '}') {
        ++pos;
        return n;
      }
      fail("expected ',' or '}' in a flow mapping (flow collections must fit on one line)");
    }
  }

  YamlNode sequence() {
    YamlNode n;
    n.line = line;
    n.kind = YamlNode::Kind::Seq;
    ++pos; // '['
    skipSpace();
    if (pos < s.size() && s[pos] == ']') {
      ++pos;
      return n;
    }
    while (true) {
      n.seq.push_back(value(true));
      skipSpace();
      if (pos < s.size() && s[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < s.size() && s[pos] == ']') {
        ++pos;
        return n;
      }
      fail("expected ',' or ']' in a flow sequence (flow collections must fit on one line)");
    }
  }

  const std::string &s;
  int line;
  size_t pos = 0;
};

class BlockParser {
public:
  explicit BlockParser(std::vector<Line> lines) : lines(std::move(lines)) {}

  YamlNode document() {
    if (lines.empty()) {
      YamlNode n;
      n.kind = YamlNode::Kind::Map;
      return n;
    }
    YamlNode n = block(lines[0].indent);
    if (i < lines.size())
      throw Failure{lines[i].number, "unexpected indentation or a second top-level value"};
    return n;
  }

private:
  static bool isSeqItem(const std::string &c) {
    return c == "-" || (c.size() >= 2 && c[0] == '-' && c[1] == ' ');
  }

  YamlNode block(int indent) {
    if (isSeqItem(lines[i].content))
      return seq(indent);
    std::string key, rest;
    bool quotedKey;
    if (FlowParser::splitKey(lines[i].content, key, rest, quotedKey))
      return map(indent);
    YamlNode n = FlowParser(lines[i].content, lines[i].number).parseWhole();
    ++i;
    return n;
  }

  /// The value after "key:" or "-" when it is on the next lines.
  YamlNode nested(int parentIndent, int line, bool allowSameIndentSeq) {
    if (i < lines.size() &&
        (lines[i].indent > parentIndent ||
         (allowSameIndentSeq && lines[i].indent == parentIndent && isSeqItem(lines[i].content))))
      return block(lines[i].indent);
    YamlNode empty; // "key:" with nothing: an empty (null) scalar
    empty.line = line;
    return empty;
  }

  YamlNode map(int indent) {
    YamlNode n;
    n.kind = YamlNode::Kind::Map;
    n.line = lines[i].number;
    while (i < lines.size() && lines[i].indent == indent && !isSeqItem(lines[i].content)) {
      const Line &l = lines[i];
      std::string key, rest;
      bool quotedKey;
      if (!FlowParser::splitKey(l.content, key, rest, quotedKey))
        throw Failure{l.number, "expected 'key: value'"};
      for (const auto &kv : n.map)
        if (kv.first == key)
          throw Failure{l.number, "duplicate key '" + key + "'"};
      ++i;
      YamlNode v =
          rest.empty() ? nested(indent, l.number, true) : FlowParser(rest, l.number).parseWhole();
      n.map.emplace_back(key, std::move(v));
    }
    if (i < lines.size() && lines[i].indent > indent)
      throw Failure{lines[i].number, "unexpected indentation"};
    return n;
  }

  YamlNode seq(int indent) {
    YamlNode n;
    n.kind = YamlNode::Kind::Seq;
    n.line = lines[i].number;
    while (i < lines.size() && lines[i].indent == indent && isSeqItem(lines[i].content)) {
      Line l = lines[i];
      std::string rest = l.content.size() > 1 ? l.content.substr(2) : "";
      size_t b = rest.find_first_not_of(' ');
      int offset = 2 + static_cast<int>(b == std::string::npos ? 0 : b);
      rest = b == std::string::npos ? "" : rest.substr(b);
      if (rest.empty()) {
        ++i;
        n.seq.push_back(nested(indent, l.number, false));
        continue;
      }
      std::string key, value;
      bool quotedKey;
      if (isSeqItem(rest) || FlowParser::splitKey(rest, key, value, quotedKey)) {
        // "- key: value" (a block mapping) or "- - x": the item continues
        // at the column after the dash.
        lines[i].indent = indent + offset;
        lines[i].content = rest;
        n.seq.push_back(block(indent + offset));
        continue;
      }
      ++i;
      n.seq.push_back(FlowParser(rest, l.number).parseWhole());
    }
    if (i < lines.size() && lines[i].indent > indent)
      throw Failure{lines[i].number, "unexpected indentation"};
    return n;
  }

  std::vector<Line> lines;
  size_t i = 0;
};

} // namespace

bool parseYamlSubset(const std::string &text, YamlNode &root, std::string &error) {
  std::vector<Line> lines;
  size_t start = 0;
  int number = 0;
  bool sawContent = false;
  try {
    while (start <= text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos)
        end = text.size();
      std::string raw = text.substr(start, end - start);
      start = end + 1;
      ++number;
      std::string s = trimRight(stripComment(raw));
      size_t indent = s.find_first_not_of(' ');
      if (indent == std::string::npos)
        continue;
      if (s[indent] == '\t')
        throw Failure{number, "tabs are not allowed for indentation"};
      std::string content = s.substr(indent);
      if (indent == 0 && (content == "---" || content.rfind("--- ", 0) == 0)) {
        if (sawContent)
          throw Failure{number, "several documents are not supported"};
        continue;
      }
      if (indent == 0 && content == "...")
        break;
      sawContent = true;
      lines.push_back({number, static_cast<int>(indent), content});
      if (end == text.size())
        break;
    }
    root = BlockParser(std::move(lines)).document();
  } catch (const Failure &f) {
    error = "line " + std::to_string(f.line) + ": " + f.what;
    return false;
  }
  return true;
}

} // namespace mist
