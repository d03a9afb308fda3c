//===- Parser.h - Recursive-descent parser for .mist ----------------------===//
/// \file
/// Builds a FileAST from one source buffer. Each parse method documents the
/// grammar rule it implements (the full grammar is in lang/SPEC.md). The
/// parser stops at the first error, which it reports with its location;
/// nesting is bounded so no input can exhaust the stack.
//===----------------------------------------------------------------------===//
#pragma once

#include "frontend/AST.h"
#include "support/Diagnostics.h"
#include "support/Lexer.h"

namespace mist {

/// "identifier 'x'", "end of file", ... for messages.
std::string describe(const Token &t);

class Parser {
public:
  Parser(unsigned bufferId, DiagnosticEngine &diag);
  /// Returns null after reporting an error.
  std::unique_ptr<FileAST> parseFile();

private:
  static constexpr unsigned maxNesting = 256;
  /// Bound on ExprAST::height. Nesting alone stays below it (maxNesting is
  /// checked first); it limits long operator chains such as 1+1+...+1.
  static constexpr unsigned maxHeight = 2 * maxNesting;

  const Token &peek();
  void advance();
  bool error(const llvm::Twine &msg);
  bool expect(Tok kind, const char *context);
  llvm::SMRange rangeFrom(llvm::SMLoc start) const;
  bool checkHeight(const ExprAST &e, llvm::SMLoc at);
  ExprPtr makeBinary(llvm::SMRange range, char op, llvm::SMLoc opLoc, ExprPtr lhs, ExprPtr rhs);

  bool parseImport(FileAST &file);
  bool parseBlock(FileAST &file);
  bool parseModel(FileAST &file);
  bool parseModelBody(ModelDecl &model);
  bool parseInput(ModelDecl &model);
  bool parseTrain(FileAST &file);
  bool parseParams(std::vector<ParamAST> &params);
  bool parseStmts(StmtList &stmts, const char *context);
  bool parseStmt(StmtList &stmts);
  ExprPtr parseExpr(unsigned depth = 0);
  ExprPtr parseMultiplicative(unsigned depth);
  ExprPtr parseUnary(unsigned depth);
  ExprPtr parsePrimary(unsigned depth);
  std::unique_ptr<CallExpr> parseCallRest(const Token &callee, unsigned depth);

  Lexer lex;
  Token tok, lookahead, prev;
  bool hasLookahead = false;
  DiagnosticEngine &diag;
  unsigned bufferId;
};

} // namespace mist
