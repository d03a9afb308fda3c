//===- IRGenContext.h - The instantiation state IRGen works on ------------===//
/// \file
/// Internal to frontend/: the value of an expression while a model is
/// instantiated (EValue) and the IRGen class whose methods are defined in
/// IRGen.cpp (expressions, calls, the model body) and IRGenTrain.cpp (the
/// instance, its parameters and the train section).
//===----------------------------------------------------------------------===//
#pragma once

#include "frontend/Builtins.h"
#include "frontend/IRGen.h"
#include "ir/OpSemantics.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mist::irgen {

constexpr unsigned maxCallDepth = 64;

/// The value of an expression during instantiation.
struct EValue {
  enum class Kind { Tensor, Dim, Real, Bool, Word, Tuple } kind = Kind::Dim;
  Value *tensor = nullptr;
  Expr dim = 0;
  double real = 0;
  bool flag = false;
  std::string word;
  std::vector<EValue> tuple;

  static EValue ofTensor(Value *v) {
    EValue e;
    e.kind = Kind::Tensor;
    e.tensor = v;
    return e;
  }
  static EValue ofDim(Expr d) {
    EValue e;
    e.kind = Kind::Dim;
    e.dim = d;
    return e;
  }
  static EValue ofReal(double r) {
    EValue e;
    e.kind = Kind::Real;
    e.real = r;
    return e;
  }
  static EValue ofBool(bool b) {
    EValue e;
    e.kind = Kind::Bool;
    e.flag = b;
    return e;
  }
};

/// Whether `e` is a whole number above zero that is too large for int64
/// (exprToInt fails on it although it is positive and whole).
bool isHugePositiveInteger(const Expr &e);

const char *kindName(EValue::Kind k);

using Env = std::map<std::string, EValue>;

class IRGen {
public:
  IRGen(const Program &p, const GenOptions &o, DiagnosticEngine &d) : prog(p), opts(o), diag(d) {}

  std::unique_ptr<Module> run();

private:
  bool error(llvm::SMLoc loc, const llvm::Twine &msg, llvm::ArrayRef<llvm::SMRange> r = {}) {
    diag.error(loc, msg, r);
    return false;
  }
  std::string str(const Expr &e) { return printExpr(e, m->symbols); }

  const InstanceDecl *pickInstance();
  bool evalTrain();
  /// One `key = value` of the train section; `seq_len` goes to `seqLen`.
  bool evalTrainEntry(const TrainEntry &e, int64_t &seqLen);
  bool evalOptimizer(const ExprAST &v);
  bool evalOptimizerSetting(const CallArg &a);
  bool evalNoDecay(const ExprAST &v);
  /// A train section's `cluster = "..."`: a relative YAML path resolved against the
  /// folder of the .mist file at `where`; a preset name as it is.
  std::string clusterRelativeTo(const std::string &cluster, llvm::SMLoc where) const;
  bool bindParams(const ModelDecl &tmpl, const InstanceDecl &inst, Env &env);
  bool genModel(const ModelDecl &tmpl, Env &base);
  /// The model's inputs, bound in `base`.
  bool genInputs(const ModelDecl &tmpl, Env &base);
  /// The repeat section (the layer region) and the post section; both get
  /// the `carried` tensors as block arguments.
  bool genLayer(const ModelDecl &tmpl, Env &base, const std::vector<std::string> &carried);
  bool genPost(const ModelDecl &tmpl, Env &base, const std::vector<std::string> &carried);
  /// `base` with each carried name bound to a new argument of `fwd`.
  Env bindCarriedArgs(Block &fwd, const std::vector<std::string> &carried, const Env &base);
  bool runStmts(const StmtList &stmts, Env &env, std::optional<EValue> *ret);

  std::optional<EValue> eval(const ExprAST &e, Env &env, const std::string &nameHint = "");
  std::optional<EValue> evalBinary(const BinaryExpr &b, Env &env, const std::string &nameHint);
  std::optional<EValue> evalCall(const CallExpr &c, Env &env, const std::string &nameHint);
  std::optional<EValue> callBlock(const CallExpr &c, const BlockDecl &blk, Env &env,
                                  const std::string &nameHint);
  std::optional<EValue> callBuiltin(const CallExpr &c, const Builtin &b, Env &env,
                                    const std::string &nameHint);
  /// One given argument of a builtin call: a tensor operand or an attribute.
  bool evalBuiltinArg(const Builtin &b, const BuiltinParam &p, const ExprAST &ae, Env &env,
                      std::vector<Value *> &tensors, AttrMap &attrs);
  /// The parameters (weights, biases) the op reads, created under `hint`'s
  /// prefix; a tied lm_head reuses the embedding's table.
  std::optional<std::vector<Value *>> builtinParams(const CallExpr &c, const Builtin &b,
                                                    const AttrMap &attrs, const std::string &hint,
                                                    llvm::SMLoc loc);
  std::optional<Value *> tiedEmbeddingTable(const CallExpr &c, llvm::SMLoc loc);
  std::optional<Expr> evalSize(const ExprAST &e, Env &env, const char *what,
                               bool zeroAllowed = false);
  std::optional<int64_t> evalConstInt(const ExprAST &e, Env &env, const char *what,
                                      bool allowZero = false);
  std::optional<double> evalRealArg(const ExprAST &e, Env &env, const char *what);
  bool checkPositive(const Expr &d, const ExprAST &at, bool zeroAllowed = false);

  Value *newValue(const std::string &base, Op *def = nullptr);
  Op *newOp(OpKind kind, llvm::SMLoc loc);
  Value *newParam(const std::string &prefix, const char *suffix, llvm::SMLoc loc);
  std::string paramPrefix(const std::string &hint);

  const Program &prog;
  const GenOptions &opts;
  DiagnosticEngine &diag;
  std::unique_ptr<Module> m;
  Region *region = nullptr;
  std::vector<std::string> path; ///< block-call naming segments
  unsigned callDepth = 0;
  /// Where a name that is not bound is looked up, for the diagnostic.
  bool inTrain = false;
  /// Names assigned in the repeat section but not carried: post cannot see them.
  std::vector<std::string> repeatLocals;
};

} // namespace mist::irgen
