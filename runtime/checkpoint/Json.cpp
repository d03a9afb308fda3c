//===- Json.cpp - The small strict JSON a safetensors header needs --------===//
#include "runtime/checkpoint/Json.h"

#include <cstdint>

namespace mist::rt {

namespace {

constexpr int kMaxDepth = 64;

void appendUtf8(std::string &out, uint32_t codePoint) {
  if (codePoint < 0x80) {
    out += char(codePoint);
  } else if (codePoint < 0x800) {
    out += char(0xC0 | (codePoint >> 6));
    out += char(0x80 | (codePoint & 0x3F));
  } else if (codePoint < 0x10000) {
    out += char(0xE0 | (codePoint >> 12));
    out += char(0x80 | ((codePoint >> 6) & 0x3F));
    out += char(0x80 | (codePoint & 0x3F));
  } else {
    out += char(0xF0 | (codePoint >> 18));
    out += char(0x80 | ((codePoint >> 12) & 0x3F));
    out += char(0x80 | ((codePoint >> 6) & 0x3F));
    out += char(0x80 | (codePoint & 0x3F));
  }
}

std::string describeByte(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  if (u >= 0x21 && u < 0x7F && c != '\'')
    return std::string("'") + c + "'";
  static const char *hex = "0123456789abcdef";
  return std::string("byte 0x") + hex[u >> 4] + hex[u & 15];
}

class Parser {
public:
  explicit Parser(std::string_view text) : text(text) {}

  std::optional<JsonValue> document(std::string &error) {
    JsonValue value;
    skipWhitespace();
    if (!parseValue(value, 0)) {
      error = message;
      return std::nullopt;
    }
    skipWhitespace();
    if (pos != text.size()) {
      error = at(pos) + "unexpected " + describeByte(text[pos]) + " after the JSON value";
      return std::nullopt;
    }
    return value;
  }

private:
  std::string_view text;
  size_t pos = 0;
  std::string message;

  static std::string at(size_t offset) { return "byte " + std::to_string(offset) + ": "; }

  bool fail(size_t offset, const std::string &what) {
    message = at(offset) + what;
    return false;
  }

  bool atEnd() const { return pos >= text.size(); }

  void skipWhitespace() {
    while (!atEnd() &&
           (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }

  bool expect(char c, const char *context) {
    if (atEnd())
      return fail(pos, std::string("expected '") + c + "' " + context + ", found the end");
    if (text[pos] != c)
      return fail(pos, std::string("expected '") + c + "' " + context + ", found " +
                           describeByte(text[pos]));
    ++pos;
    return true;
  }

  bool parseValue(JsonValue &out, int depth) {
    if (atEnd())
      return fail(pos, "expected a value, found the end");
    switch (text[pos]) {
    case '{':
      return parseObject(out, depth + 1);
    case '[':
      return parseArray(out, depth + 1);
    case '"':
      out.kind = JsonValue::Kind::String;
      return parseString(out.text);
    case 't':
      return parseLiteral("true", out, JsonValue::Kind::Bool, true);
    case 'f':
      return parseLiteral("false", out, JsonValue::Kind::Bool, false);
    case 'n':
      return parseLiteral("null", out, JsonValue::Kind::Null, false);
    default:
      if (text[pos] == '-' || (text[pos] >= '0' && text[pos] <= '9'))
        return parseNumber(out);
      return fail(pos, "expected a value, found " + describeByte(text[pos]));
    }
  }

  bool parseLiteral(std::string_view word, JsonValue &out, JsonValue::Kind kind, bool value) {
    if (text.substr(pos, word.size()) != word)
      return fail(pos, "expected a value, found " + describeByte(text[pos]));
    pos += word.size();
    out.kind = kind;
    out.boolean = value;
    return true;
  }

  bool digits(const char *what) {
    size_t begin = pos;
    while (!atEnd() && text[pos] >= '0' && text[pos] <= '9')
      ++pos;
    if (pos == begin)
      return fail(pos, std::string("expected a digit ") + what);
    return true;
  }

  bool parseNumber(JsonValue &out) {
    size_t begin = pos;
    if (text[pos] == '-')
      ++pos;
    if (!atEnd() && text[pos] == '0') {
      ++pos;
      if (!atEnd() && text[pos] >= '0' && text[pos] <= '9')
        return fail(begin, "a number has a leading zero");
    } else if (!digits("in a number")) {
      return false;
    }
    if (!atEnd() && text[pos] == '.') {
      ++pos;
      if (!digits("after the decimal point"))
        return false;
    }
    if (!atEnd() && (text[pos] == 'e' || text[pos] == 'E')) {
      ++pos;
      if (!atEnd() && (text[pos] == '+' || text[pos] == '-'))
        ++pos;
      if (!digits("in the exponent"))
        return false;
    }
    out.kind = JsonValue::Kind::Number;
    out.text = std::string(text.substr(begin, pos - begin));
    return true;
  }

  bool hex4(uint32_t &value) {
    if (text.size() - pos < 4)
      return fail(pos, "a \\u escape needs 4 hex digits");
    value = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text[pos + i];
      uint32_t digit;
      if (c >= '0' && c <= '9')
        digit = c - '0';
      else if (c >= 'a' && c <= 'f')
        digit = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        digit = c - 'A' + 10;
      else
        return fail(pos + i, "a \\u escape needs 4 hex digits, found " + describeByte(c));
      value = value * 16 + digit;
    }
    pos += 4;
    return true;
  }

  bool parseString(std::string &out) {
    const size_t begin = pos;
    ++pos; // the opening quote
    out.clear();
    while (true) {
      if (atEnd())
        return fail(begin, "unterminated string");
      char c = text[pos];
      if (c == '"') {
        ++pos;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20)
        return fail(pos, "unescaped control character " + describeByte(c) + " in a string");
      if (c != '\\') {
        out += c; // UTF-8 was validated for the whole document
        ++pos;
        continue;
      }
      const size_t escape = pos++;
      if (atEnd())
        return fail(begin, "unterminated string");
      switch (text[pos++]) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case '/':
        out += '/';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        uint32_t unit = 0;
        if (!hex4(unit))
          return false;
        if (unit >= 0xDC00 && unit <= 0xDFFF)
          return fail(escape, "lone low surrogate in a \\u escape");
        if (unit >= 0xD800 && unit <= 0xDBFF) {
          // A high surrogate must be followed by an escaped low one.
          uint32_t low = 0;
          if (text.substr(pos, 2) != "\\u")
            return fail(escape, "high surrogate not followed by a \\u low surrogate");
          pos += 2;
          if (!hex4(low))
            return false;
          if (low < 0xDC00 || low > 0xDFFF)
            return fail(escape, "high surrogate not followed by a low surrogate");
          unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
        }
        appendUtf8(out, unit);
        break;
      }
      default:
        return fail(escape, "unknown escape \\" + std::string(1, text[pos - 1]));
      }
    }
  }

  bool parseArray(JsonValue &out, int depth) {
    if (depth > kMaxDepth)
      return fail(pos, "nested deeper than " + std::to_string(kMaxDepth));
    out.kind = JsonValue::Kind::Array;
    ++pos; // '['
    skipWhitespace();
    if (!atEnd() && text[pos] == ']') {
      ++pos;
      return true;
    }
    while (true) {
      JsonValue item;
      skipWhitespace();
      if (!parseValue(item, depth))
        return false;
      out.items.push_back(std::move(item));
      skipWhitespace();
      if (!atEnd() && text[pos] == ',') {
        ++pos;
        continue;
      }
      return expect(']', "or ',' in an array");
    }
  }

  bool parseObject(JsonValue &out, int depth) {
    if (depth > kMaxDepth)
      return fail(pos, "nested deeper than " + std::to_string(kMaxDepth));
    out.kind = JsonValue::Kind::Object;
    ++pos; // '{'
    skipWhitespace();
    if (!atEnd() && text[pos] == '}') {
      ++pos;
      return true;
    }
    while (true) {
      skipWhitespace();
      if (atEnd() || text[pos] != '"')
        return fail(pos, std::string("expected a string key in an object, found ") +
                             (atEnd() ? "the end" : describeByte(text[pos])));
      std::string key;
      if (!parseString(key))
        return false;
      skipWhitespace();
      if (!expect(':', "after an object key"))
        return false;
      skipWhitespace();
      JsonValue value;
      if (!parseValue(value, depth))
        return false;
      out.members.emplace_back(std::move(key), std::move(value));
      skipWhitespace();
      if (!atEnd() && text[pos] == ',') {
        ++pos;
        continue;
      }
      return expect('}', "or ',' in an object");
    }
  }
};

} // namespace

std::optional<size_t> findInvalidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = text[i];
    int length;
    uint32_t codePoint, minimum;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      length = 2, codePoint = c & 0x1F, minimum = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      length = 3, codePoint = c & 0x0F, minimum = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      length = 4, codePoint = c & 0x07, minimum = 0x10000;
    } else {
      return i;
    }
    if (text.size() - i < size_t(length))
      return i;
    for (int k = 1; k < length; ++k) {
      const unsigned char next = text[i + k];
      if ((next & 0xC0) != 0x80)
        return i;
      codePoint = codePoint << 6 | (next & 0x3F);
    }
    if (codePoint < minimum || codePoint > 0x10FFFF || (codePoint >= 0xD800 && codePoint <= 0xDFFF))
      return i;
    i += length;
  }
  return std::nullopt;
}

std::optional<JsonValue> parseJson(std::string_view document, std::string &error) {
  if (auto bad = findInvalidUtf8(document)) {
    error = "byte " + std::to_string(*bad) + ": not valid UTF-8";
    return std::nullopt;
  }
  return Parser(document).document(error);
}

std::string quoteJson(std::string_view text) {
  static const char *hex = "0123456789abcdef";
  std::string out = "\"";
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (u < 0x20) {
        out += "\\u00";
        out += hex[u >> 4];
        out += hex[u & 15];
      } else {
        out += c;
      }
    }
  }
  out += '"';
  return out;
}

const char *describeJsonKind(JsonValue::Kind kind) {
  switch (kind) {
  case JsonValue::Kind::Null:
    return "null";
  case JsonValue::Kind::Bool:
    return "a boolean";
  case JsonValue::Kind::Number:
    return "a number";
  case JsonValue::Kind::String:
    return "a string";
  case JsonValue::Kind::Array:
    return "an array";
  case JsonValue::Kind::Object:
    return "an object";
  }
  return "a value";
}

} // namespace mist::rt
