//===- Lexer.h - Tokenizer for .mist sources and textual IR ---------------===//
/// \file
/// One lexer for both inputs: the languages share numbers, identifiers,
/// strings and punctuation; `%name` and `@name` only occur in textual IR.
/// Every token carries its source range; the lexer always makes progress,
/// so no input can make it loop.
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/SMLoc.h"

namespace mist {

enum class Tok {
#define MIST_TOKEN(Kind, Spelling) Kind,
#include "support/Token.def"
};

llvm::StringRef tokenSpelling(Tok k);

struct Token {
  Tok kind = Tok::Eof;
  llvm::StringRef text; ///< the exact source text (without quotes for strings)
  llvm::SMRange range;
  llvm::SMLoc loc() const { return range.Start; }
  bool is(Tok k) const { return kind == k; }
};

class Lexer {
public:
  explicit Lexer(llvm::StringRef buffer) : buf(buffer), cur(buffer.begin()) {}
  Token next();

private:
  Token make(Tok kind, const char *start, llvm::StringRef text);
  Token make(Tok kind, const char *start) {
    return make(kind, start, {start, size_t(cur - start)});
  }
  void skipSpaceAndComments();
  Token lexNumber(const char *start);
  Token lexString(const char *start);

  llvm::StringRef buf;
  const char *cur;
};

} // namespace mist
