//===- Parser.cpp - Recursive-descent parser for .mist --------------------===//
#include "frontend/Parser.h"

#include "format/Limits.h"

#include <algorithm>

using namespace mist;

Parser::Parser(unsigned bufferId, DiagnosticEngine &diag)
    : lex(diag.sourceMgr().getMemoryBuffer(bufferId)->getBuffer()), diag(diag), bufferId(bufferId) {
  advance();
}

const Token &Parser::peek() {
  if (!hasLookahead) {
    lookahead = lex.next();
    hasLookahead = true;
  }
  return lookahead;
}

void Parser::advance() {
  prev = tok;
  if (hasLookahead) {
    tok = lookahead;
    hasLookahead = false;
  } else {
    tok = lex.next();
  }
}

/// Tokens that only the textual IR uses: none is valid anywhere in a .mist
/// source, so an error at one of them names the character rather than
/// reporting what the grammar expected (`a % b` is not a modulo; `%b` would
/// otherwise read as "found 'b'").
static std::optional<std::string> irOnlyTokenMessage(const Token &t) {
  switch (t.kind) {
  case Tok::Percent:
  case Tok::ValueName:
    return std::string("unexpected character '%' (there is no modulo operator)");
  case Tok::GlobalName:
    return std::string("unexpected character '@'");
  case Tok::Caret:
    return std::string("unexpected character '^' (there is no power operator)");
  case Tok::Question:
    return std::string("unexpected character '?'");
  case Tok::Dot:
    return std::string("unexpected character '.'");
  case Tok::EqualEqual:
    return std::string("unexpected '==' (there are no comparison operators)");
  default:
    return std::nullopt;
  }
}

bool Parser::error(const llvm::Twine &msg) {
  if (tok.is(Tok::Error)) {
    diag.error(tok.loc(),
               tok.text == "unterminated string" ? "unterminated string literal"
                                                 : "invalid character in source",
               tok.range);
  } else if (auto irOnly = irOnlyTokenMessage(tok)) {
    // Underline the character itself, not the IR name that follows it.
    llvm::SMRange r = tok.range;
    if (tok.is(Tok::ValueName) || tok.is(Tok::GlobalName))
      r.End = llvm::SMLoc::getFromPointer(tok.loc().getPointer() + 1);
    diag.error(tok.loc(), *irOnly, r);
  } else {
    diag.error(tok.loc(), msg, tok.range);
  }
  return false;
}

bool Parser::checkHeight(const ExprAST &e, llvm::SMLoc at) {
  if (e.height <= maxHeight)
    return true;
  diag.error(at, "expression nested too deeply");
  return false;
}

bool Parser::expect(Tok kind, const char *context) {
  if (!tok.is(kind))
    return error("expected '" + tokenSpelling(kind) + "' " + context + ", found " + describe(tok));
  advance();
  return true;
}

llvm::SMRange Parser::rangeFrom(llvm::SMLoc start) const { return {start, prev.range.End}; }

std::string mist::describe(const Token &t) {
  switch (t.kind) {
  case Tok::Eof:
    return "end of file";
  case Tok::Ident:
    return "identifier '" + t.text.str() + "'";
  case Tok::Integer:
  case Tok::Real:
    return "number " + t.text.str();
  case Tok::String:
    return "string \"" + t.text.str() + "\"";
  default:
    return "'" + t.text.str() + "'";
  }
}

/// file := {import | block | model | train} EOF
std::unique_ptr<FileAST> Parser::parseFile() {
  auto file = std::make_unique<FileAST>();
  file->bufferId = bufferId;
  while (!tok.is(Tok::Eof)) {
    bool ok;
    switch (tok.kind) {
    case Tok::KwImport:
      ok = parseImport(*file);
      break;
    case Tok::KwBlock:
      ok = parseBlock(*file);
      break;
    case Tok::KwModel:
      ok = parseModel(*file);
      break;
    case Tok::KwTrain:
      ok = parseTrain(*file);
      break;
    default:
      ok = error("expected 'import', 'block', 'model' or 'train' at top level, found " +
                 describe(tok));
    }
    if (!ok)
      return nullptr;
  }
  return file;
}

/// import := 'import' string
bool Parser::parseImport(FileAST &file) {
  advance();
  if (!tok.is(Tok::String))
    return error("expected a quoted module name after 'import'");
  if (tok.text.empty())
    return error("import path is empty");
  file.imports.push_back({tok.text.str(), tok.range});
  advance();
  return true;
}

/// params := '(' [param {',' param}] ')' ; param := ident ['=' expr]
bool Parser::parseParams(std::vector<ParamAST> &params) {
  if (!expect(Tok::LParen, "to open the parameter list"))
    return false;
  while (tok.is(Tok::Ident)) {
    ParamAST p;
    p.name = tok.text.str();
    p.range = tok.range;
    advance();
    if (tok.is(Tok::Equal)) {
      advance();
      p.defaultValue = parseExpr();
      if (!p.defaultValue)
        return false;
    }
    params.push_back(std::move(p));
    if (!tok.is(Tok::Comma))
      break;
    advance();
  }
  return expect(Tok::RParen, "to close the parameter list");
}

/// block := 'block' ident params '{' stmts '}'
bool Parser::parseBlock(FileAST &file) {
  advance();
  if (!tok.is(Tok::Ident))
    return error("expected a block name after 'block'");
  BlockDecl b;
  b.name = tok.text.str();
  b.nameRange = tok.range;
  advance();
  if (!parseParams(b.params) || !expect(Tok::LBrace, "to open the block body") ||
      !parseStmts(b.body, "block body"))
    return false;
  file.blocks.push_back(std::move(b));
  return true;
}

/// model := 'model' ident params '{' modelBody '}' | 'model' ident '=' call
bool Parser::parseModel(FileAST &file) {
  advance();
  if (!tok.is(Tok::Ident))
    return error("expected a model name after 'model'");
  Token name = tok;
  advance();
  if (tok.is(Tok::Equal)) {
    advance();
    if (!tok.is(Tok::Ident))
      return error("expected a model template name after '='");
    Token callee = tok;
    advance();
    if (!tok.is(Tok::LParen))
      return error("expected '(' after the model template name");
    InstanceDecl inst;
    inst.name = name.text.str();
    inst.nameRange = name.range;
    inst.call = parseCallRest(callee, 0);
    if (!inst.call)
      return false;
    file.instances.push_back(std::move(inst));
    return true;
  }
  ModelDecl m;
  m.name = name.text.str();
  m.nameRange = name.range;
  if (!parseParams(m.params) || !expect(Tok::LBrace, "to open the model body") ||
      !parseModelBody(m))
    return false;
  file.models.push_back(std::move(m));
  return true;
}

/// modelBody := {input | 'pre' '{' stmts '}' | 'repeat' expr '{' stmts '}'
///               | 'post' '{' stmts '}'} '}'
bool Parser::parseModelBody(ModelDecl &m) {
  while (!tok.is(Tok::RBrace)) {
    switch (tok.kind) {
    case Tok::KwInput:
      if (!parseInput(m))
        return false;
      break;
    case Tok::KwPre:
    case Tok::KwPost: {
      bool isPre = tok.is(Tok::KwPre);
      if (isPre ? m.hasPre : m.hasPost)
        return error(std::string("the model has a second '") + (isPre ? "pre" : "post") +
                     "' section");
      (isPre ? m.preLoc : m.postLoc) = tok.loc();
      (isPre ? m.hasPre : m.hasPost) = true;
      advance();
      if (!expect(Tok::LBrace, "to open the section") ||
          !parseStmts(isPre ? m.pre : m.post, isPre ? "pre section" : "post section"))
        return false;
      break;
    }
    case Tok::KwRepeat:
      if (m.hasRepeat)
        return error("the model has a second 'repeat' section");
      m.hasRepeat = true;
      m.repeatLoc = tok.loc();
      advance();
      m.repeatCount = parseExpr();
      if (!m.repeatCount || !expect(Tok::LBrace, "to open the repeated layer") ||
          !parseStmts(m.body, "repeat section"))
        return false;
      break;
    default:
      return error("expected 'input', 'pre', 'repeat', 'post' or '}' in the model body, found " +
                   describe(tok));
    }
  }
  advance();
  return true;
}

/// input := 'input' ident ':' dtype '[' expr {',' expr} ']'
bool Parser::parseInput(ModelDecl &m) {
  advance();
  if (!tok.is(Tok::Ident))
    return error("expected an input name");
  InputAST in;
  in.name = tok.text.str();
  in.range = tok.range;
  advance();
  if (!expect(Tok::Colon, "after the input name"))
    return false;
  if (!tok.is(Tok::Ident))
    return error("expected the input's element type (such as i32)");
  in.dtype = tok.text.str();
  in.dtypeRange = tok.range;
  advance();
  if (!expect(Tok::LBracket, "to open the input shape"))
    return false;
  while (true) {
    ExprPtr d = parseExpr();
    if (!d)
      return false;
    if (in.dims.size() == limits::maxTensorAxes) { // the IR reader's limit too
      diag.error(d->loc(),
                 "tensors have at most " + std::to_string(limits::maxTensorAxes) + " axes",
                 d->range);
      return false;
    }
    in.dims.push_back(std::move(d));
    if (!tok.is(Tok::Comma))
      break;
    advance();
  }
  if (!expect(Tok::RBracket, "to close the input shape"))
    return false;
  m.inputs.push_back(std::move(in));
  return true;
}

/// train := 'train' '{' {ident '=' expr [';' | ',']} '}'
bool Parser::parseTrain(FileAST &file) {
  TrainDecl t;
  t.loc = tok.loc();
  advance();
  if (!expect(Tok::LBrace, "after 'train'"))
    return false;
  while (!tok.is(Tok::RBrace)) {
    if (!tok.is(Tok::Ident))
      return error("expected a train setting name, found " + describe(tok));
    TrainEntry e;
    e.key = tok.text.str();
    e.keyRange = tok.range;
    advance();
    if (!expect(Tok::Equal, "after the setting name"))
      return false;
    e.value = parseExpr();
    if (!e.value)
      return false;
    t.entries.push_back(std::move(e));
    if (tok.is(Tok::Semicolon) || tok.is(Tok::Comma))
      advance();
  }
  advance();
  file.trains.push_back(std::move(t));
  return true;
}

/// stmts := {stmt [';']} '}'
bool Parser::parseStmts(StmtList &stmts, const char *context) {
  while (!tok.is(Tok::RBrace)) {
    if (tok.is(Tok::Eof))
      return error(std::string("expected '}' to close the ") + context);
    if (!parseStmt(stmts))
      return false;
    if (tok.is(Tok::Semicolon))
      advance();
  }
  advance();
  return true;
}

/// stmt := 'return' expr | ident '=' expr
bool Parser::parseStmt(StmtList &stmts) {
  StmtAST s;
  s.loc = tok.loc();
  if (tok.is(Tok::KwReturn)) {
    advance();
    s.isReturn = true;
  } else if (tok.is(Tok::Ident)) {
    s.target = tok.text.str();
    s.targetRange = tok.range;
    advance();
    if (!expect(Tok::Equal, "after the variable name"))
      return false;
  } else {
    return error("expected a statement ('name = expr' or 'return expr'), found " + describe(tok));
  }
  s.value = parseExpr();
  if (!s.value)
    return false;
  stmts.push_back(std::move(s));
  return true;
}

/// expr := mul {('+' | '-') mul}
ExprPtr Parser::parseExpr(unsigned depth) {
  if (depth > maxNesting) {
    error("expression nested too deeply");
    return nullptr;
  }
  llvm::SMLoc start = tok.loc();
  ExprPtr lhs = parseMultiplicative(depth);
  while (lhs && (tok.is(Tok::Plus) || tok.is(Tok::Minus))) {
    char op = tok.text[0];
    llvm::SMLoc opLoc = tok.loc();
    advance();
    ExprPtr rhs = parseMultiplicative(depth);
    if (!rhs)
      return nullptr;
    lhs = makeBinary(rangeFrom(start), op, opLoc, std::move(lhs), std::move(rhs));
  }
  return lhs;
}

/// mul := unary {('*' | '/') unary}
ExprPtr Parser::parseMultiplicative(unsigned depth) {
  llvm::SMLoc start = tok.loc();
  ExprPtr lhs = parseUnary(depth);
  while (lhs && (tok.is(Tok::Star) || tok.is(Tok::Slash))) {
    char op = tok.text[0];
    llvm::SMLoc opLoc = tok.loc();
    advance();
    ExprPtr rhs = parseUnary(depth);
    if (!rhs)
      return nullptr;
    lhs = makeBinary(rangeFrom(start), op, opLoc, std::move(lhs), std::move(rhs));
  }
  return lhs;
}

/// A binary node; fails (returns null) when it makes the tree too high.
ExprPtr Parser::makeBinary(llvm::SMRange range, char op, llvm::SMLoc opLoc, ExprPtr lhs,
                           ExprPtr rhs) {
  unsigned height = std::max(lhs->height, rhs->height) + 1;
  auto e = std::make_unique<BinaryExpr>(range, op, opLoc, std::move(lhs), std::move(rhs));
  e->height = height;
  if (!checkHeight(*e, opLoc))
    return nullptr;
  return e;
}

/// unary := '-' unary | primary
ExprPtr Parser::parseUnary(unsigned depth) {
  if (depth > maxNesting) {
    error("expression nested too deeply");
    return nullptr;
  }
  if (tok.is(Tok::Minus)) {
    llvm::SMLoc start = tok.loc();
    advance();
    ExprPtr operand = parseUnary(depth + 1);
    if (!operand)
      return nullptr;
    unsigned height = operand->height + 1;
    auto e = std::make_unique<UnaryExpr>(rangeFrom(start), std::move(operand));
    e->height = height;
    if (!checkHeight(*e, start))
      return nullptr;
    return e;
  }
  return parsePrimary(depth);
}

/// primary := integer | real | string | 'true' | 'false' | ident | call
///          | '(' expr {',' expr} ')'
ExprPtr Parser::parsePrimary(unsigned depth) {
  Token t = tok;
  switch (t.kind) {
  case Tok::Integer:
  case Tok::Real:
    advance();
    return std::make_unique<NumberExpr>(t.range, t.text.str(), t.is(Tok::Real));
  case Tok::String:
    advance();
    return std::make_unique<StringExpr>(t.range, t.text.str());
  case Tok::KwTrue:
  case Tok::KwFalse:
    advance();
    return std::make_unique<BoolExpr>(t.range, t.is(Tok::KwTrue));
  case Tok::Ident:
    advance();
    if (tok.is(Tok::LParen))
      return parseCallRest(t, depth + 1);
    return std::make_unique<IdentExpr>(t.range, t.text.str());
  case Tok::LParen: {
    advance();
    ExprPtr first = parseExpr(depth + 1);
    if (!first)
      return nullptr;
    if (tok.is(Tok::Comma)) {
      auto tuple = std::make_unique<TupleExpr>(t.range);
      tuple->elements.push_back(std::move(first));
      while (tok.is(Tok::Comma)) {
        advance();
        ExprPtr e = parseExpr(depth + 1);
        if (!e)
          return nullptr;
        tuple->elements.push_back(std::move(e));
      }
      if (!expect(Tok::RParen, "to close the tuple"))
        return nullptr;
      tuple->range = rangeFrom(t.loc());
      for (auto &el : tuple->elements)
        tuple->height = std::max(tuple->height, el->height + 1);
      if (!checkHeight(*tuple, t.loc()))
        return nullptr;
      return tuple;
    }
    if (!expect(Tok::RParen, "to close the parenthesized expression"))
      return nullptr;
    return first;
  }
  default:
    error("expected an expression, found " + describe(t));
    return nullptr;
  }
}

/// call := ident '(' [arg {',' arg}] ')' ; arg := [ident '='] expr
std::unique_ptr<CallExpr> Parser::parseCallRest(const Token &callee, unsigned depth) {
  if (depth > maxNesting) {
    error("expression nested too deeply");
    return nullptr;
  }
  auto call = std::make_unique<CallExpr>(callee.range, callee.text.str(), callee.range);
  advance(); // '('
  while (!tok.is(Tok::RParen)) {
    CallArg arg;
    if (tok.is(Tok::Ident) && peek().is(Tok::Equal)) {
      arg.name = tok.text.str();
      arg.nameRange = tok.range;
      advance();
      advance();
    }
    arg.value = parseExpr(depth + 1);
    if (!arg.value)
      return nullptr;
    call->height = std::max(call->height, arg.value->height + 1);
    call->args.push_back(std::move(arg));
    if (!tok.is(Tok::Comma))
      break;
    advance();
  }
  if (!expect(Tok::RParen, "to close the argument list"))
    return nullptr;
  call->range = rangeFrom(callee.loc());
  if (!checkHeight(*call, callee.loc()))
    return nullptr;
  return call;
}
