//===- Printable.cpp - User text made safe to print in a terminal ---------===//
#include "support/Printable.h"

#include "llvm/Support/ConvertUTF.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mist;

namespace {

bool isBidiControl(llvm::UTF32 c) {
  return (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069) || c == 0x200E ||
         c == 0x200F || c == 0x061C;
}

/// The escape for the character of `length` bytes at text[i] (code point
/// `c`), or "" when it prints as it is.
std::string escapeOf(llvm::StringRef text, size_t i, unsigned length, llvm::UTF32 c, bool valid) {
  std::string out;
  llvm::raw_string_ostream os(out);
  if (!valid) {
    os << "\\x" << llvm::format_hex_no_prefix((unsigned char)text[i], 2);
  } else if ((c < 0x20 && c != '\t') || c == 0x7F || (c >= 0x80 && c <= 0x9F) || isBidiControl(c)) {
    if (length == 1)
      os << "\\x" << llvm::format_hex_no_prefix(unsigned(c), 2);
    else
      os << "<U+" << llvm::format_hex_no_prefix(unsigned(c), 4, /*Upper=*/true) << ">";
  }
  return os.str();
}

/// Decodes the character at text[i]: its length and code point, or
/// `valid` false for a byte that starts no valid UTF-8 sequence.
void decode(llvm::StringRef text, size_t i, unsigned &length, llvm::UTF32 &c, bool &valid) {
  const auto *begin = reinterpret_cast<const llvm::UTF8 *>(text.data() + i);
  const auto *end = reinterpret_cast<const llvm::UTF8 *>(text.data() + text.size());
  length = unsigned(llvm::getNumBytesForUTF8(*begin));
  valid = length >= 1 && i + length <= text.size() && llvm::isLegalUTF8Sequence(begin, end);
  if (!valid) {
    length = 1;
    c = 0;
    return;
  }
  const llvm::UTF8 *from = begin;
  llvm::UTF32 code = 0;
  llvm::UTF32 *to = &code;
  valid = llvm::ConvertUTF8toUTF32(&from, begin + length, &to, to + 1, llvm::strictConversion) ==
          llvm::conversionOK;
  c = code;
  if (!valid)
    length = 1;
}

} // namespace

bool mist::needsEscaping(llvm::StringRef text) {
  for (size_t i = 0; i < text.size();) {
    unsigned length = 1;
    llvm::UTF32 c = 0;
    bool valid = true;
    decode(text, i, length, c, valid);
    if (!escapeOf(text, i, length, c, valid).empty())
      return true;
    i += length;
  }
  return false;
}

std::string mist::printable(llvm::StringRef text, std::vector<size_t> *columns) {
  std::string out;
  if (columns)
    columns->assign(text.size() + 1, 0);
  size_t column = 0;
  for (size_t i = 0; i < text.size();) {
    unsigned length = 1;
    llvm::UTF32 c = 0;
    bool valid = true;
    decode(text, i, length, c, valid);
    const std::string escape = escapeOf(text, i, length, c, valid);
    if (columns)
      for (unsigned k = 0; k < length; ++k)
        (*columns)[i + k] = column;
    if (escape.empty()) {
      out.append(text.data() + i, length);
      column += 1; // one column per character (tabs are the caller's)
    } else {
      out += escape;
      column += escape.size();
    }
    i += length;
  }
  if (columns)
    columns->back() = column;
  return out;
}
