//===- Lexer.cpp - Tokenizer for .mist sources and textual IR -------------===//
#include "support/Lexer.h"

#include "llvm/ADT/StringSwitch.h"
#include <cctype>

using namespace mist;

llvm::StringRef mist::tokenSpelling(Tok k) {
  switch (k) {
#define MIST_TOKEN(Kind, Spelling)                                                                 \
  case Tok::Kind:                                                                                  \
    return Spelling;
#include "support/Token.def"
  }
  return "?";
}

static bool isIdentStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
static bool isIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
static bool isDigit(char c) { return c >= '0' && c <= '9'; }

Token Lexer::make(Tok kind, const char *start, llvm::StringRef text) {
  Token t;
  t.kind = kind;
  t.text = text;
  t.range = llvm::SMRange(llvm::SMLoc::getFromPointer(start), llvm::SMLoc::getFromPointer(cur));
  return t;
}

void Lexer::skipSpaceAndComments() {
  const char *end = buf.end();
  while (cur != end) {
    if (std::isspace(static_cast<unsigned char>(*cur))) {
      ++cur;
    } else if (*cur == '/' && cur + 1 != end && cur[1] == '/') {
      while (cur != end && *cur != '\n')
        ++cur;
    } else {
      return;
    }
  }
}

Token Lexer::lexNumber(const char *start) {
  const char *end = buf.end();
  bool real = false;
  while (cur != end && isDigit(*cur))
    ++cur;
  if (cur != end && *cur == '.' && cur + 1 != end && isDigit(cur[1])) {
    real = true;
    ++cur;
    while (cur != end && isDigit(*cur))
      ++cur;
  }
  if (cur != end && (*cur == 'e' || *cur == 'E')) {
    const char *save = cur++;
    if (cur != end && (*cur == '+' || *cur == '-'))
      ++cur;
    if (cur != end && isDigit(*cur)) {
      real = true;
      while (cur != end && isDigit(*cur))
        ++cur;
    } else {
      cur = save; // `2e` is 2 followed by an identifier
    }
  }
  return make(real ? Tok::Real : Tok::Integer, start);
}

Token Lexer::lexString(const char *start) {
  const char *end = buf.end();
  ++cur; // opening quote
  const char *body = cur;
  while (cur != end && *cur != '"' && *cur != '\n')
    ++cur;
  if (cur == end || *cur != '"')
    return make(Tok::Error, start, "unterminated string");
  llvm::StringRef text(body, size_t(cur - body));
  ++cur;
  return make(Tok::String, start, text);
}

Token Lexer::next() {
  skipSpaceAndComments();
  const char *start = cur;
  if (cur == buf.end())
    return make(Tok::Eof, start);
  char c = *cur;
  if (isIdentStart(c)) {
    while (cur != buf.end() && isIdentChar(*cur))
      ++cur;
    llvm::StringRef text(start, size_t(cur - start));
    Tok kind = llvm::StringSwitch<Tok>(text)
#define MIST_KEYWORD(Kind, Spelling) .Case(Spelling, Tok::Kind)
#define MIST_PUNCT(Kind, Spelling)
#include "support/Token.def"
                   .Default(Tok::Ident);
    return make(kind, start, text);
  }
  if (isDigit(c))
    return lexNumber(start);
  if (c == '"')
    return lexString(start);
  if ((c == '%' || c == '@') && cur + 1 != buf.end() && (isIdentChar(cur[1]))) {
    ++cur;
    // IR names: letters, digits, `_` and `.` (pre.embedding.weight, x.1)
    while (cur != buf.end() && (isIdentChar(*cur) || *cur == '.'))
      ++cur;
    return make(c == '%' ? Tok::ValueName : Tok::GlobalName, start,
                llvm::StringRef(start + 1, size_t(cur - start - 1)));
  }
  ++cur;
  switch (c) {
  case '(':
    return make(Tok::LParen, start);
  case ')':
    return make(Tok::RParen, start);
  case '{':
    return make(Tok::LBrace, start);
  case '}':
    return make(Tok::RBrace, start);
  case '[':
    return make(Tok::LBracket, start);
  case ']':
    return make(Tok::RBracket, start);
  case ',':
    return make(Tok::Comma, start);
  case ':':
    return make(Tok::Colon, start);
  case ';':
    return make(Tok::Semicolon, start);
  case '+':
    return make(Tok::Plus, start);
  case '-':
    return make(Tok::Minus, start);
  case '*':
    return make(Tok::Star, start);
  case '/':
    return make(Tok::Slash, start);
  case '%':
    return make(Tok::Percent, start);
  case '^':
    return make(Tok::Caret, start);
  case '?':
    return make(Tok::Question, start);
  case '.':
    return make(Tok::Dot, start);
  case '=':
    if (cur != buf.end() && *cur == '=') {
      ++cur;
      return make(Tok::EqualEqual, start);
    }
    return make(Tok::Equal, start);
  default:
    return make(Tok::Error, start);
  }
}
