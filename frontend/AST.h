//===- AST.h - Syntax tree of .mist sources -------------------------------===//
/// \file
/// What the parser builds and Sema/IRGen read. Nodes keep their source range
/// for diagnostics. Expressions use LLVM-style Kind + classof RTTI.
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Casting.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/raw_ostream.h"
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mist {

class ExprAST {
public:
  enum class Kind { Number, Bool, String, Ident, Unary, Binary, Call, Tuple };
  ExprAST(Kind kind, llvm::SMRange range) : kind(kind), range(range) {}
  virtual ~ExprAST();
  Kind getKind() const { return kind; }
  llvm::SMLoc loc() const { return range.Start; }
  const Kind kind;
  llvm::SMRange range;
  /// Nodes on the longest path from this node to a leaf (1 for a leaf). The
  /// parser bounds it, so the recursive walks of Sema and IRGen cannot
  /// exhaust the stack, however long an operator chain such as 1+1+...+1 is.
  unsigned height = 1;
};
using ExprPtr = std::unique_ptr<ExprAST>;

struct NumberExpr : ExprAST {
  NumberExpr(llvm::SMRange r, std::string text, bool isReal)
      : ExprAST(Kind::Number, r), text(std::move(text)), isReal(isReal) {}
  std::string text;
  bool isReal;
  static bool classof(const ExprAST *e) { return e->getKind() == Kind::Number; }
};

struct BoolExpr : ExprAST {
  BoolExpr(llvm::SMRange r, bool value) : ExprAST(Kind::Bool, r), value(value) {}
  bool value;
  static bool classof(const ExprAST *e) { return e->getKind() == Kind::Bool; }
};

struct StringExpr : ExprAST {
  StringExpr(llvm::SMRange r, std::string value)
      : ExprAST(Kind::String, r), value(std::move(value)) {}
  std::string value;
  static bool classof(const ExprAST *e) { return e->getKind() == Kind::String; }
};

struct IdentExpr : ExprAST {
  IdentExpr(llvm::SMRange r, std::string name) : ExprAST(Kind::Ident, r), name(std::move(name)) {}
  std::string name;
  static bool classof(const ExprAST *e) { return e->getKind() == Kind::Ident; }
};

struct UnaryExpr : ExprAST { // only negation
  UnaryExpr(llvm::SMRange r, ExprPtr operand)
      : ExprAST(Kind::Unary, r), operand(std::move(operand)) {}
  ExprPtr operand;
  static bool classof(const ExprAST *e) { return e->getKind() == Kind::Unary; }
};

struct BinaryExpr : ExprAST {
  BinaryExpr(llvm::SMRange r, char op, llvm::SMLoc opLoc, ExprPtr lhs, ExprPtr rhs)
      : ExprAST(Kind::Binary, r), op(op), opLoc(opLoc), lhs(std::move(lhs)), rhs(std::move(rhs)) {}
  char op; ///< one of + - * /
  llvm::SMLoc opLoc;
  ExprPtr lhs, rhs;
  static bool classof(const ExprAST *e) { return e->getKind() == Kind::Binary; }
};

struct CallArg {
  std::string name; ///< empty for positional arguments
  llvm::SMRange nameRange;
  ExprPtr value;
};

struct CallExpr : ExprAST {
  CallExpr(llvm::SMRange r, std::string callee, llvm::SMRange calleeRange)
      : ExprAST(Kind::Call, r), callee(std::move(callee)), calleeRange(calleeRange) {}
  std::string callee;
  llvm::SMRange calleeRange;
  std::vector<CallArg> args;
  static bool classof(const ExprAST *e) { return e->getKind() == Kind::Call; }
};

struct TupleExpr : ExprAST {
  TupleExpr(llvm::SMRange r) : ExprAST(Kind::Tuple, r) {}
  std::vector<ExprPtr> elements;
  static bool classof(const ExprAST *e) { return e->getKind() == Kind::Tuple; }
};

/// `name = expr` or `return expr`.
struct StmtAST {
  bool isReturn = false;
  std::string target; ///< assigned variable (empty for return)
  llvm::SMRange targetRange;
  ExprPtr value;
  llvm::SMLoc loc;
};
using StmtList = std::vector<StmtAST>;

struct ParamAST {
  std::string name;
  llvm::SMRange range;
  ExprPtr defaultValue; ///< may be null
};

struct BlockDecl {
  std::string name;
  llvm::SMRange nameRange;
  std::vector<ParamAST> params;
  StmtList body;
};

struct InputAST {
  std::string name;
  llvm::SMRange range;
  std::string dtype;
  llvm::SMRange dtypeRange;
  std::vector<ExprPtr> dims;
};

struct ModelDecl {
  std::string name;
  llvm::SMRange nameRange;
  std::vector<ParamAST> params;
  std::vector<InputAST> inputs;
  StmtList pre, body, post;
  ExprPtr repeatCount;
  llvm::SMLoc preLoc, repeatLoc, postLoc;
  bool hasPre = false, hasRepeat = false, hasPost = false;
};

/// `model name = template(arg = value, ...)`
struct InstanceDecl {
  std::string name;
  llvm::SMRange nameRange;
  std::unique_ptr<CallExpr> call;
};

struct TrainEntry {
  std::string key;
  llvm::SMRange keyRange;
  ExprPtr value;
};

struct TrainDecl {
  llvm::SMLoc loc;
  std::vector<TrainEntry> entries;
};

struct ImportDecl {
  std::string path;
  llvm::SMRange range;
};

/// One parsed source file.
struct FileAST {
  unsigned bufferId = 0;
  std::vector<ImportDecl> imports;
  std::vector<BlockDecl> blocks;
  std::vector<ModelDecl> models;
  std::vector<InstanceDecl> instances;
  std::vector<TrainDecl> trains;
};

/// Writes the tree as indented text (`--emit=ast`).
void dumpAST(const FileAST &file, llvm::raw_ostream &os);

} // namespace mist
