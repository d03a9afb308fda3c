//===- Json.h - The small strict JSON a safetensors header needs ----------===//
/// \file
/// A JSON (RFC 8259) reader and a string quoter, so the runtime needs no JSON
/// library on GPU hosts. The reader is strict: UTF-8 only, no comments, no
/// trailing commas, no leading zeros, no lone surrogates, nothing after the
/// value but whitespace, nesting at most 64 deep. Objects keep their members
/// in document order, duplicates included, so the caller can name a
/// duplicate key in its own terms. Numbers keep their literal text; the
/// caller decides which forms it accepts.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mist::rt {

struct JsonValue {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  std::string text; ///< String: the decoded UTF-8; Number: the literal as written
  std::vector<JsonValue> items;
  std::vector<std::pair<std::string, JsonValue>> members;

  /// Declared here, defaulted below where JsonValue is complete: clang
  /// (with libstdc++) otherwise checks std::pair<std::string, JsonValue>'s
  /// default constructor while JsonValue is still incomplete, and fails.
  JsonValue();
};

inline JsonValue::JsonValue() = default;

/// The value of `document`, or nullopt with `error` saying what is wrong at
/// which byte ("byte 17: expected ':' after an object key").
std::optional<JsonValue> parseJson(std::string_view document, std::string &error);

/// `text` as a JSON string literal, escaped like serde_json (which writes
/// the reference safetensors headers): `"` and `\`, \b \f \n \r \t, other
/// control characters as \u00xx, everything else (UTF-8) as is.
std::string quoteJson(std::string_view text);

/// The offset of the first byte of `text` that is not part of well-formed
/// UTF-8 (overlong forms and surrogates are malformed), or nullopt.
std::optional<size_t> findInvalidUtf8(std::string_view text);

/// The kind's name for messages: "an object", "a string", ...
const char *describeJsonKind(JsonValue::Kind kind);

} // namespace mist::rt
