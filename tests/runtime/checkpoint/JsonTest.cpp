//===- JsonTest.cpp - The strict JSON reader and the string quoter --------===//
#include "runtime/checkpoint/Json.h"

#include <gtest/gtest.h>

using namespace mist::rt;

namespace {

std::string parseError(std::string_view text) {
  std::string error;
  EXPECT_FALSE(parseJson(text, error).has_value()) << "accepted: " << text;
  return error;
}

} // namespace

TEST(Json, ParsesEveryKind) {
  std::string error;
  std::optional<JsonValue> v = parseJson(
      R"( {"a": [1, -2.5e3, 0], "b": {"c": true, "d": false, "e": null}, "a": "dup"} )", error);
  ASSERT_TRUE(v) << error;
  ASSERT_EQ(v->kind, JsonValue::Kind::Object);
  ASSERT_EQ(v->members.size(), 3u); // duplicates kept, in order
  EXPECT_EQ(v->members[0].first, "a");
  const JsonValue &a = v->members[0].second;
  ASSERT_EQ(a.kind, JsonValue::Kind::Array);
  ASSERT_EQ(a.items.size(), 3u);
  EXPECT_EQ(a.items[0].text, "1");
  EXPECT_EQ(a.items[1].text, "-2.5e3");
  EXPECT_EQ(a.items[1].kind, JsonValue::Kind::Number);
  const JsonValue &b = v->members[1].second;
  EXPECT_EQ(b.members[0].second.kind, JsonValue::Kind::Bool);
  EXPECT_TRUE(b.members[0].second.boolean);
  EXPECT_FALSE(b.members[1].second.boolean);
  EXPECT_EQ(b.members[2].second.kind, JsonValue::Kind::Null);
  EXPECT_EQ(v->members[2].second.text, "dup");
}

TEST(Json, DecodesEscapes) {
  std::string error;
  std::optional<JsonValue> v =
      parseJson(R"("q\" b\\ s\/ \b\f\n\r\t \u00e9 \u2713 \ud83d\ude00 é")", error);
  ASSERT_TRUE(v) << error;
  EXPECT_EQ(v->text, "q\" b\\ s/ \b\f\n\r\t \xC3\xA9 \xE2\x9C\x93 \xF0\x9F\x98\x80 \xC3\xA9");
}

TEST(Json, RejectsWhatRfc8259Does) {
  EXPECT_EQ(parseError(""), "byte 0: expected a value, found the end");
  EXPECT_EQ(parseError("{\"a\":1,}"), "byte 7: expected a string key in an object, found '}'");
  EXPECT_EQ(parseError("[1,]"), "byte 3: expected a value, found ']'");
  EXPECT_EQ(parseError("{\"a\" 1}"), "byte 5: expected ':' after an object key, found '1'");
  EXPECT_EQ(parseError("{\"a\":1"), "byte 6: expected '}' or ',' in an object, found the end");
  EXPECT_EQ(parseError("[01]"), "byte 1: a number has a leading zero");
  EXPECT_EQ(parseError("[1.]"), "byte 3: expected a digit after the decimal point");
  EXPECT_EQ(parseError("[1e]"), "byte 3: expected a digit in the exponent");
  EXPECT_EQ(parseError("[-]"), "byte 2: expected a digit in a number");
  EXPECT_EQ(parseError("[+1]"), "byte 1: expected a value, found '+'");
  EXPECT_EQ(parseError("{} x"), "byte 3: unexpected 'x' after the JSON value");
  EXPECT_EQ(parseError("{'a':1}"), "byte 1: expected a string key in an object, found byte 0x27");
  EXPECT_EQ(parseError("[tru]"), "byte 1: expected a value, found 't'");
  EXPECT_EQ(parseError("\"abc"), "byte 0: unterminated string");
  EXPECT_EQ(parseError("\"a\tb\""), "byte 2: unescaped control character byte 0x09 in a string");
  EXPECT_EQ(parseError(R"("\x")"), "byte 1: unknown escape \\x");
  EXPECT_EQ(parseError(R"("\u12")"), "byte 3: a \\u escape needs 4 hex digits");
  EXPECT_EQ(parseError(R"("\u12zz")"), "byte 5: a \\u escape needs 4 hex digits, found 'z'");
  EXPECT_EQ(parseError(R"("\udc00")"), "byte 1: lone low surrogate in a \\u escape");
  EXPECT_EQ(parseError(R"("\ud800x")"),
            "byte 1: high surrogate not followed by a \\u low surrogate");
  EXPECT_EQ(parseError(R"("\ud800\u0041")"),
            "byte 1: high surrogate not followed by a low surrogate");
  EXPECT_EQ(parseError("// c\n{}"), "byte 0: expected a value, found '/'");
  EXPECT_EQ(parseError(std::string(65, '[') + std::string(65, ']')),
            "byte 64: nested deeper than 64");
}

TEST(Json, RejectsInvalidUtf8) {
  EXPECT_EQ(parseError("\"a\xFF\""), "byte 2: not valid UTF-8");
  EXPECT_EQ(parseError("\"\xC0\xAF\""), "byte 1: not valid UTF-8");     // overlong '/'
  EXPECT_EQ(parseError("\"\xED\xA0\x80\""), "byte 1: not valid UTF-8"); // surrogate
  EXPECT_EQ(parseError("\"\xE2\x9C\""), "byte 1: not valid UTF-8");     // cut short
  EXPECT_EQ(findInvalidUtf8("plain \xC3\xA9 \xF0\x9F\x98\x80"), std::nullopt);
  EXPECT_EQ(findInvalidUtf8("\xF4\x90\x80\x80"), 0u); // above U+10FFFF
}

TEST(Json, QuotesLikeSerdeJson) {
  EXPECT_EQ(quoteJson("plain"), "\"plain\"");
  EXPECT_EQ(quoteJson("q\"b\\/"), "\"q\\\"b\\\\/\"");
  EXPECT_EQ(quoteJson("\b\f\n\r\t"), "\"\\b\\f\\n\\r\\t\"");
  EXPECT_EQ(quoteJson(std::string("\x01\x1f\x7f", 3)), "\"\\u0001\\u001f\x7f\"");
  EXPECT_EQ(quoteJson("\xC3\xA9"), "\"\xC3\xA9\"");
  // Whatever is quoted reads back as itself.
  const std::string odd = std::string("a\0b\"c\\\n\x1b\xE2\x9C\x93", 11);
  std::string error;
  std::optional<JsonValue> back = parseJson(quoteJson(odd), error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(back->text, odd);
}
