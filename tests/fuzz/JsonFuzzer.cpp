//===- JsonFuzzer.cpp - libFuzzer target for the runtime's JSON reader ----===//
/// \file
/// Feeds arbitrary bytes to mist::rt::parseJson (runtime/checkpoint/Json.h,
/// the reader of safetensors headers) and traps when an invariant breaks:
///
///  - a document that parses prints back (this file's printer, with the
///    module's quoteJson for strings and keys) to text that parses to an
///    equal value, and printing that again gives the same text;
///  - every decoded string and key is valid UTF-8;
///  - a rejected document's error names a byte inside it ("byte N: ...",
///    0 <= N <= size);
///  - findInvalidUtf8 agrees with an independent validator (the Unicode
///    standard's table of well-formed byte sequences) on the input;
///  - for valid UTF-8 input, quoteJson(input) parses to a string equal to it.
///
/// Built only with -DMIST_FUZZ=ON (docs/fuzzing.md).
//===----------------------------------------------------------------------===//
#include "runtime/checkpoint/Json.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

using mist::rt::JsonValue;

namespace {

void print(const JsonValue &v, std::string &out) {
  switch (v.kind) {
  case JsonValue::Kind::Null:
    out += "null";
    return;
  case JsonValue::Kind::Bool:
    out += v.boolean ? "true" : "false";
    return;
  case JsonValue::Kind::Number:
    out += v.text;
    return;
  case JsonValue::Kind::String:
    out += mist::rt::quoteJson(v.text);
    return;
  case JsonValue::Kind::Array:
    out += '[';
    for (size_t i = 0; i < v.items.size(); ++i) {
      if (i)
        out += ',';
      print(v.items[i], out);
    }
    out += ']';
    return;
  case JsonValue::Kind::Object:
    out += '{';
    for (size_t i = 0; i < v.members.size(); ++i) {
      if (i)
        out += ',';
      out += mist::rt::quoteJson(v.members[i].first);
      out += ':';
      print(v.members[i].second, out);
    }
    out += '}';
    return;
  }
  __builtin_trap(); // a kind outside the enum
}

bool equal(const JsonValue &a, const JsonValue &b) {
  if (a.kind != b.kind)
    return false;
  switch (a.kind) {
  case JsonValue::Kind::Null:
    return true;
  case JsonValue::Kind::Bool:
    return a.boolean == b.boolean;
  case JsonValue::Kind::Number:
  case JsonValue::Kind::String:
    return a.text == b.text;
  case JsonValue::Kind::Array:
    if (a.items.size() != b.items.size())
      return false;
    for (size_t i = 0; i < a.items.size(); ++i)
      if (!equal(a.items[i], b.items[i]))
        return false;
    return true;
  case JsonValue::Kind::Object:
    if (a.members.size() != b.members.size())
      return false;
    for (size_t i = 0; i < a.members.size(); ++i)
      if (a.members[i].first != b.members[i].first ||
          !equal(a.members[i].second, b.members[i].second))
        return false;
    return true;
  }
  return false;
}

/// Every string and key is valid UTF-8; every number's text is a JSON
/// number on its own.
void checkContents(const JsonValue &v) {
  switch (v.kind) {
  case JsonValue::Kind::String:
    if (mist::rt::findInvalidUtf8(v.text))
      __builtin_trap();
    return;
  case JsonValue::Kind::Number: {
    std::string error;
    std::optional<JsonValue> alone = mist::rt::parseJson(v.text, error);
    if (!alone || alone->kind != JsonValue::Kind::Number || alone->text != v.text)
      __builtin_trap();
    return;
  }
  case JsonValue::Kind::Array:
    for (const JsonValue &item : v.items)
      checkContents(item);
    return;
  case JsonValue::Kind::Object:
    for (const auto &[key, value] : v.members) {
      if (mist::rt::findInvalidUtf8(key))
        __builtin_trap();
      checkContents(value);
    }
    return;
  default:
    return;
  }
}

/// The offset of the first ill-formed sequence, after the Unicode
/// standard's Table 3-7 (well-formed UTF-8 byte sequences).
std::optional<size_t> referenceInvalidUtf8(std::string_view s) {
  auto in = [](unsigned char c, unsigned lo, unsigned hi) { return c >= lo && c <= hi; };
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char b0 = s[i];
    const size_t left = s.size() - i;
    auto at = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
    if (b0 <= 0x7F) {
      i += 1;
    } else if (in(b0, 0xC2, 0xDF)) {
      if (left < 2 || !in(at(1), 0x80, 0xBF))
        return i;
      i += 2;
    } else if (in(b0, 0xE0, 0xEF)) {
      const unsigned lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
      if (left < 3 || !in(at(1), lo, hi) || !in(at(2), 0x80, 0xBF))
        return i;
      i += 3;
    } else if (in(b0, 0xF0, 0xF4)) {
      const unsigned lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
      if (left < 4 || !in(at(1), lo, hi) || !in(at(2), 0x80, 0xBF) || !in(at(3), 0x80, 0xBF))
        return i;
      i += 4;
    } else {
      return i;
    }
  }
  return std::nullopt;
}

/// "byte N: ..." with N <= size.
void checkError(const std::string &error, size_t size) {
  constexpr std::string_view prefix = "byte ";
  if (error.compare(0, prefix.size(), prefix) != 0)
    __builtin_trap();
  size_t pos = prefix.size();
  uint64_t offset = 0;
  if (pos >= error.size() || error[pos] < '0' || error[pos] > '9')
    __builtin_trap();
  while (pos < error.size() && error[pos] >= '0' && error[pos] <= '9') {
    offset = offset * 10 + uint64_t(error[pos++] - '0');
    if (offset > size)
      __builtin_trap();
  }
  if (error.compare(pos, 2, ": ") != 0)
    __builtin_trap();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string_view text(reinterpret_cast<const char *>(data), size);

  const std::optional<size_t> invalid = mist::rt::findInvalidUtf8(text);
  if (invalid != referenceInvalidUtf8(text))
    __builtin_trap(); // the two UTF-8 validators disagree

  std::string error;
  std::optional<JsonValue> value = mist::rt::parseJson(text, error);
  if (!value) {
    checkError(error, size);
  } else {
    checkContents(*value);
    std::string printed;
    print(*value, printed);
    std::string again;
    std::optional<JsonValue> reread = mist::rt::parseJson(printed, again);
    if (!reread || !equal(*value, *reread))
      __builtin_trap(); // parse -> print -> parse changed the value
    std::string reprinted;
    print(*reread, reprinted);
    if (reprinted != printed)
      __builtin_trap();
  }

  if (!invalid) {
    std::string quoted = mist::rt::quoteJson(text), quoteError;
    std::optional<JsonValue> string = mist::rt::parseJson(quoted, quoteError);
    if (!string || string->kind != JsonValue::Kind::String || string->text != text)
      __builtin_trap(); // quoteJson does not round-trip valid UTF-8
  }
  return 0;
}
