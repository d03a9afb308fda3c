//===- IRGen.cpp - Instantiates a model of the program as IR --------------===//
#include "frontend/IRGen.h"

#include "frontend/Builtins.h"
#include "ir/OpSemantics.h"
#include "llvm/ADT/ScopeExit.h"
#include <cmath>
#include <map>

using namespace mist;

namespace {

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
bool isHugePositiveInteger(const Expr &e) {
  Expr x = e.expand();
  if (!GiNaC::is_a<GiNaC::numeric>(x))
    return false;
  const GiNaC::numeric &n = GiNaC::ex_to<GiNaC::numeric>(x);
  return n.is_pos_integer() && !exprToInt(x);
}

const char *kindName(EValue::Kind k) {
  switch (k) {
  case EValue::Kind::Tensor:
    return "tensor";
  case EValue::Kind::Dim:
    return "size";
  case EValue::Kind::Real:
    return "real number";
  case EValue::Kind::Bool:
    return "boolean";
  case EValue::Kind::Word:
    return "word";
  case EValue::Kind::Tuple:
    return "tuple";
  }
  return "?";
}

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
  bool bindParams(const ModelDecl &tmpl, const InstanceDecl &inst, Env &env);
  bool genModel(const ModelDecl &tmpl, Env &base);
  bool runStmts(const StmtList &stmts, Env &env, std::optional<EValue> *ret);

  std::optional<EValue> eval(const ExprAST &e, Env &env, const std::string &nameHint = "");
  std::optional<EValue> evalBinary(const BinaryExpr &b, Env &env, const std::string &nameHint);
  std::optional<EValue> evalCall(const CallExpr &c, Env &env, const std::string &nameHint);
  std::optional<EValue> callBlock(const CallExpr &c, const BlockDecl &blk, Env &env,
                                  const std::string &nameHint);
  std::optional<EValue> callBuiltin(const CallExpr &c, const Builtin &b, Env &env,
                                    const std::string &nameHint);
  std::optional<Expr> evalSize(const ExprAST &e, Env &env, const char *what);
  std::optional<int64_t> evalConstInt(const ExprAST &e, Env &env, const char *what,
                                      bool allowZero = false);
  std::optional<double> evalRealArg(const ExprAST &e, Env &env, const char *what);
  bool checkPositive(const Expr &d, const ExprAST &at);

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

const InstanceDecl *IRGen::pickInstance() {
  const FileAST &mainFile = *prog.files.front();
  if (!opts.modelName.empty()) {
    auto it = prog.instances.find(opts.modelName);
    if (it == prog.instances.end()) {
      error({}, "no model instance named '" + opts.modelName + "'");
      return nullptr;
    }
    return it->second;
  }
  if (mainFile.instances.empty()) {
    llvm::SMLoc start = llvm::SMLoc::getFromPointer(
        diag.sourceMgr().getMemoryBuffer(mainFile.bufferId)->getBufferStart());
    error(start, "no model instance to compile: add a line such as "
                 "'model my_model = gpt(vocab = 50304, ...)'");
    return nullptr;
  }
  return &mainFile.instances.back();
}

std::optional<int64_t> IRGen::evalConstInt(const ExprAST &e, Env &env, const char *what,
                                           bool allowZero) {
  auto v = eval(e, env);
  if (!v)
    return std::nullopt;
  std::optional<int64_t> i;
  if (v->kind == EValue::Kind::Dim)
    i = exprToInt(v->dim);
  if (!i || *i < 0 || (*i == 0 && !allowZero)) {
    if (v->kind == EValue::Kind::Dim && isHugePositiveInteger(v->dim))
      error(e.loc(), std::string(what) + " is too large", e.range);
    else
      error(e.loc(),
            std::string(what) + " must be a " + (allowZero ? "non-negative" : "positive") +
                " whole number",
            e.range);
    return std::nullopt;
  }
  return i;
}

std::optional<double> IRGen::evalRealArg(const ExprAST &e, Env &env, const char *what) {
  auto v = eval(e, env);
  if (!v)
    return std::nullopt;
  if (v->kind == EValue::Kind::Real)
    return v->real;
  if (v->kind == EValue::Kind::Dim)
    if (auto d = exprToDouble(v->dim)) {
      if (std::isfinite(*d))
        return d;
      error(e.loc(), std::string(what) + " is out of range", e.range);
      return std::nullopt;
    }
  error(e.loc(), std::string(what) + " must be a number, got a " + kindName(v->kind), e.range);
  return std::nullopt;
}

bool IRGen::evalTrain() {
  TrainConfig &t = m->train;
  int64_t seqLen = 0;
  Env empty;
  inTrain = true;
  auto leaveTrain = llvm::make_scope_exit([&] { inTrain = false; });
  const TrainEntry *gradDtypeEntry = nullptr;
  if (const TrainDecl *td = prog.train) {
    for (const TrainEntry &e : td->entries) {
      const std::string &k = e.key;
      if (k == "global_batch" || k == "seq_len" || k == "warmup_steps") {
        // No warmup is a valid schedule; a batch or sequence of 0 is not.
        auto v = evalConstInt(*e.value, empty, k.c_str(), /*allowZero=*/k == "warmup_steps");
        if (!v)
          return false;
        (k == "global_batch" ? t.globalBatch : k == "seq_len" ? seqLen : t.warmupSteps) = *v;
      } else if (k == "lr" || k == "grad_clip") {
        auto v = evalRealArg(*e.value, empty, k.c_str());
        if (!v)
          return false;
        if (!(*v > 0))
          return error(e.value->loc(), k + " must be positive", e.value->range);
        (k == "lr" ? t.lr : t.gradClip) = *v;
      } else if (k == "dtype" || k == "master_dtype" || k == "grad_dtype") {
        auto *id = llvm::dyn_cast<IdentExpr>(e.value.get());
        auto dt = id ? parseDType(id->name) : std::nullopt;
        if (!dt || *dt == DType::I32 || *dt == DType::U8)
          return error(e.value->loc(), k + " must be one of bf16, f16, f32", e.value->range);
        if (k == "grad_dtype")
          t.gradDtype = *dt, gradDtypeEntry = &e;
        else
          (k == "dtype" ? t.dtype : t.masterDtype) = *dt;
      } else if (k == "optimizer") {
        const ExprAST *v = e.value.get();
        std::string name;
        const CallExpr *call = llvm::dyn_cast<CallExpr>(v);
        if (call)
          name = call->callee;
        else if (auto *id = llvm::dyn_cast<IdentExpr>(v))
          name = id->name;
        if (name != "adamw" && name != "sgd")
          return error(v->loc(), "unknown optimizer; expected adamw(...) or sgd(...)", v->range);
        t.optimizer = name;
        static const std::vector<CallArg> noArgs;
        for (const CallArg &a : call ? call->args : noArgs) {
          if (a.name.empty())
            return error(a.value->loc(), "optimizer arguments must be named");
          if (a.name == "betas") {
            auto *tup = llvm::dyn_cast<TupleExpr>(a.value.get());
            if (!tup || tup->elements.size() != 2)
              return error(a.value->loc(), "betas must be a pair such as (0.9, 0.95)",
                           a.value->range);
            auto b1 = evalRealArg(*tup->elements[0], empty, "beta1");
            auto b2 = b1 ? evalRealArg(*tup->elements[1], empty, "beta2") : std::nullopt;
            if (!b2)
              return false;
            if (*b1 < 0 || *b1 >= 1 || *b2 < 0 || *b2 >= 1)
              return error(a.value->loc(), "betas must lie in [0, 1)", a.value->range);
            t.beta1 = *b1;
            t.beta2 = *b2;
            continue;
          }
          double *slot = a.name == "lr"                               ? &t.lr
                         : a.name == "weight_decay" || a.name == "wd" ? &t.weightDecay
                         : a.name == "eps"                            ? &t.eps
                                                                      : nullptr;
          if (!slot)
            return error(a.nameRange.Start,
                         "unknown optimizer setting '" + a.name +
                             "' (expected lr, betas, weight_decay, eps)",
                         a.nameRange);
          auto r = evalRealArg(*a.value, empty, a.name.c_str());
          if (!r)
            return false;
          if (*r < 0 || (a.name != "weight_decay" && a.name != "wd" && *r == 0))
            return error(a.value->loc(), a.name + " must be positive", a.value->range);
          *slot = *r;
        }
      } else {
        return error(e.keyRange.Start,
                     "unknown train setting '" + k +
                         "' (expected global_batch, seq_len, optimizer, lr, "
                         "warmup_steps, grad_clip, dtype, master_dtype, grad_dtype)",
                     e.keyRange);
      }
    }
  }
  // Gradients narrower than the weights would round every update twice.
  if (gradDtypeEntry && dtypeBytes(t.gradientDtype()) < dtypeBytes(t.dtype))
    return error(gradDtypeEntry->value->loc(),
                 "grad_dtype " + dtypeName(t.gradientDtype()).str() +
                     " is narrower than the weights' dtype " + dtypeName(t.dtype).str(),
                 gradDtypeEntry->value->range);
  if (opts.globalBatch)
    t.globalBatch = opts.globalBatch;
  if (opts.seqLen)
    seqLen = opts.seqLen;
  if (seqLen <= 0)
    return error(prog.train ? prog.train->loc : llvm::SMLoc(),
                 "the sequence length is not set: add 'seq_len = N' to the train section or "
                 "pass --seq-len");
  m->symbols.declare("b", SymbolKind::Batch, std::nullopt);
  m->symbols.declare("s", SymbolKind::Seq, seqLen);
  return true;
}

bool IRGen::bindParams(const ModelDecl &tmpl, const InstanceDecl &inst, Env &env) {
  env["b"] = EValue::ofDim(m->symbols.lookup("b")->sym);
  env["s"] = EValue::ofDim(m->symbols.lookup("s")->sym);
  for (const ParamAST &p : tmpl.params) {
    const CallArg *given = nullptr;
    for (const CallArg &a : inst.call->args)
      if (a.name == p.name)
        given = &a;
    if (!given) {
      auto v = eval(*p.defaultValue, env);
      if (!v)
        return false;
      env[p.name] = *v; // a default stays an expression of earlier parameters
      continue;
    }
    Env constants;
    auto v = eval(*given->value, constants);
    if (!v)
      return false;
    if (v->kind == EValue::Kind::Dim) {
      auto i = exprToInt(v->dim);
      if (!i || *i <= 0)
        return error(given->value->loc(),
                     "model parameter '" + p.name +
                         (isHugePositiveInteger(v->dim) ? "' is too large"
                                                        : "' must be a positive whole number"),
                     given->value->range);
      const Symbol *s = m->symbols.declare(p.name, SymbolKind::Model, *i);
      env[p.name] = EValue::ofDim(s->sym);
    } else {
      env[p.name] = *v;
    }
  }
  return true;
}

Value *IRGen::newValue(const std::string &base, Op *def) {
  auto v = std::make_unique<Value>();
  v->name = m->uniqueName(base);
  v->def = def;
  Value *raw = v.get();
  if (def)
    def->results.push_back(std::move(v));
  return raw;
}

Op *IRGen::newOp(OpKind kind, llvm::SMLoc loc) {
  Block &b = region->fwd;
  b.ops.push_back(std::make_unique<Op>(kind, loc));
  return b.ops.back().get();
}

std::string IRGen::paramPrefix(const std::string &hint) {
  std::string prefix = std::string(regionName(region->kind));
  for (const std::string &seg : path)
    prefix += "." + seg;
  return m->uniqueName(prefix + "." + hint);
}

Value *IRGen::newParam(const std::string &prefix, const char *suffix, llvm::SMLoc loc) {
  Op *op = newOp(OpKind::Param, loc);
  auto v = std::make_unique<Value>();
  v->name = prefix + "." + suffix;
  (void)m->reserveName(v->name); // unique: the prefix is
  v->def = op;
  op->results.push_back(std::move(v));
  return op->result();
}

bool IRGen::checkPositive(const Expr &d, const ExprAST &at) {
  Expr bound = m->symbols.bindAll(d, {{m->symbols.lookup("b")->sym, 1}});
  auto i = exprToInt(bound);
  if (!i || *i <= 0)
    return error(at.loc(),
                 "size " + str(d) + " must be a positive whole number, but it is " + str(bound),
                 at.range);
  return true;
}

std::optional<Expr> IRGen::evalSize(const ExprAST &e, Env &env, const char *what) {
  auto v = eval(e, env);
  if (!v)
    return std::nullopt;
  if (v->kind != EValue::Kind::Dim) {
    error(e.loc(), std::string(what) + " must be a size, got a " + kindName(v->kind), e.range);
    return std::nullopt;
  }
  if (!checkPositive(v->dim, e))
    return std::nullopt;
  return v->dim;
}

std::optional<EValue> IRGen::eval(const ExprAST &e, Env &env, const std::string &nameHint) {
  if (auto *n = llvm::dyn_cast<NumberExpr>(&e)) {
    if (n->isReal) {
      double d = std::strtod(n->text.c_str(), nullptr);
      if (!std::isfinite(d)) {
        error(e.loc(), "number " + n->text + " is out of range", e.range);
        return std::nullopt;
      }
      return EValue::ofReal(d);
    }
    if (n->text.size() > 18) {
      error(e.loc(), "integer " + n->text + " is too large", e.range);
      return std::nullopt;
    }
    return EValue::ofDim(GiNaC::numeric(n->text.c_str()));
  }
  if (auto *b = llvm::dyn_cast<BoolExpr>(&e))
    return EValue::ofBool(b->value);
  if (auto *s = llvm::dyn_cast<StringExpr>(&e)) {
    error(s->loc(), "strings are only allowed in 'import'", s->range);
    return std::nullopt;
  }
  if (auto *id = llvm::dyn_cast<IdentExpr>(&e)) {
    auto it = env.find(id->name);
    if (it == env.end()) {
      if (inTrain)
        error(id->loc(),
              "use of undefined name '" + id->name + "' (train settings are constant expressions)",
              id->range);
      else if (region == &m->post && llvm::is_contained(repeatLocals, id->name))
        error(id->loc(),
              "'" + id->name +
                  "' is local to the repeat section; post only sees "
                  "values that pre computes and the repeat section reassigns",
              id->range);
      else
        error(id->loc(),
              "'" + id->name +
                  "' is not available here; a value from pre reaches "
                  "the layers and post only if the repeat section reassigns it",
              id->range);
      return std::nullopt;
    }
    return it->second;
  }
  if (auto *u = llvm::dyn_cast<UnaryExpr>(&e)) {
    auto v = eval(*u->operand, env);
    if (!v)
      return std::nullopt;
    if (v->kind == EValue::Kind::Dim)
      return EValue::ofDim(-v->dim);
    if (v->kind == EValue::Kind::Real)
      return EValue::ofReal(-v->real);
    error(u->loc(), std::string("cannot negate a ") + kindName(v->kind), u->range);
    return std::nullopt;
  }
  if (auto *b = llvm::dyn_cast<BinaryExpr>(&e))
    return evalBinary(*b, env, nameHint);
  if (auto *c = llvm::dyn_cast<CallExpr>(&e))
    return evalCall(*c, env, nameHint);
  if (auto *t = llvm::dyn_cast<TupleExpr>(&e)) {
    error(t->loc(), "a tuple is only allowed as the optimizer's betas", t->range);
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<EValue> IRGen::evalBinary(const BinaryExpr &b, Env &env,
                                        const std::string &nameHint) {
  auto lhs = eval(*b.lhs, env);
  if (!lhs)
    return std::nullopt;
  auto rhs = eval(*b.rhs, env);
  if (!rhs)
    return std::nullopt;
  using K = EValue::Kind;
  if (lhs->kind == K::Tensor && rhs->kind == K::Tensor) {
    if (b.op != '+' && b.op != '*') {
      error(b.opLoc, std::string("operator '") + b.op + "' is not defined on tensors (use + or *)");
      return std::nullopt;
    }
    OpKind kind = b.op == '+' ? OpKind::Add : OpKind::Mul;
    Op *op = newOp(kind, b.opLoc);
    op->operands = {lhs->tensor, rhs->tensor};
    newValue(nameHint.empty() ? opName(kind).str() : nameHint, op);
    return EValue::ofTensor(op->result());
  }
  if (lhs->kind == K::Dim && rhs->kind == K::Dim) {
    switch (b.op) {
    case '+':
      return EValue::ofDim(lhs->dim + rhs->dim);
    case '-':
      return EValue::ofDim(lhs->dim - rhs->dim);
    case '*':
      return EValue::ofDim(lhs->dim * rhs->dim);
    default:
      break;
    }
    Expr q = m->symbols.bindAll(rhs->dim);
    if (q.is_zero()) {
      error(b.opLoc, "division by zero (" + str(rhs->dim) + " is 0)", b.range);
      return std::nullopt;
    }
    Expr quotient = m->symbols.bindAll(lhs->dim / rhs->dim);
    if (!GiNaC::is_a<GiNaC::numeric>(quotient) ||
        !GiNaC::ex_to<GiNaC::numeric>(quotient).is_integer()) {
      if (GiNaC::is_a<GiNaC::numeric>(quotient)) {
        error(b.opLoc,
              "size division " + str(lhs->dim) + " / " + str(rhs->dim) + " is not exact (" +
                  str(m->symbols.bindAll(lhs->dim)) + " / " + str(q) + ")",
              b.range);
        return std::nullopt;
      }
    }
    if (!GiNaC::is_a<GiNaC::numeric>(rhs->dim))
      m->assume(lhs->dim, rhs->dim);
    return EValue::ofDim(lhs->dim / rhs->dim);
  }
  auto asReal = [&](const EValue &v) -> std::optional<double> {
    if (v.kind == K::Real)
      return v.real;
    if (v.kind == K::Dim)
      return exprToDouble(m->symbols.bindAll(v.dim));
    return std::nullopt;
  };
  auto l = asReal(*lhs), r = asReal(*rhs);
  if (l && r && (lhs->kind == K::Real || rhs->kind == K::Real)) {
    if (b.op == '/' && *r == 0) {
      error(b.opLoc, "division by zero", b.range);
      return std::nullopt;
    }
    double v = b.op == '+' ? *l + *r : b.op == '-' ? *l - *r : b.op == '*' ? *l * *r : *l / *r;
    if (!std::isfinite(*l) || !std::isfinite(*r) || !std::isfinite(v)) {
      // An infinite real would reach the IR, whose text cannot represent it.
      error(b.opLoc, std::string("result of '") + b.op + "' is out of range for a real number",
            b.range);
      return std::nullopt;
    }
    return EValue::ofReal(v);
  }
  error(b.opLoc,
        std::string("operator '") + b.op + "' cannot combine a " + kindName(lhs->kind) + " and a " +
            kindName(rhs->kind),
        b.range);
  return std::nullopt;
}

std::optional<EValue> IRGen::evalCall(const CallExpr &c, Env &env, const std::string &nameHint) {
  if (const Builtin *b = lookupBuiltin(c.callee))
    return callBuiltin(c, *b, env, nameHint);
  auto it = prog.blocks.find(c.callee);
  if (it == prog.blocks.end()) {
    error(c.calleeRange.Start, "'" + c.callee + "' is not a block or built-in operation here",
          c.calleeRange);
    return std::nullopt;
  }
  return callBlock(c, *it->second, env, nameHint);
}

std::optional<EValue> IRGen::callBlock(const CallExpr &c, const BlockDecl &blk, Env &env,
                                       const std::string &nameHint) {
  if (callDepth >= maxCallDepth) {
    error(c.calleeRange.Start,
          "block calls nest more than " + std::to_string(maxCallDepth) + " deep (is '" + blk.name +
              "' recursive?)",
          c.calleeRange);
    return std::nullopt;
  }
  Env inner;
  inner["b"] = env["b"];
  inner["s"] = env["s"];
  std::vector<const ExprAST *> args(blk.params.size(), nullptr);
  size_t positional = 0;
  for (const CallArg &a : c.args) {
    size_t idx = a.name.empty() ? positional++ : 0;
    if (!a.name.empty())
      for (size_t i = 0; i < blk.params.size(); ++i)
        if (blk.params[i].name == a.name)
          idx = i;
    if (idx < args.size())
      args[idx] = a.value.get();
  }
  for (size_t i = 0; i < blk.params.size(); ++i) {
    const ParamAST &p = blk.params[i];
    std::optional<EValue> v = args[i] ? eval(*args[i], env) : eval(*p.defaultValue, inner);
    if (!v)
      return std::nullopt;
    inner[p.name] = *v;
  }
  // A call assigned to a fresh name scopes the parameter names inside it
  // (attn = gpt_attention(...) -> layer.attn.qkv.weight); other calls add no
  // segment, and clashes get numeric suffixes.
  bool scoped = !nameHint.empty() && !env.count(nameHint);
  if (scoped)
    path.push_back(nameHint);
  ++callDepth;
  std::optional<EValue> ret;
  bool ok = runStmts(blk.body, inner, &ret);
  --callDepth;
  if (scoped)
    path.pop_back();
  if (!ok)
    return std::nullopt;
  return ret;
}

std::optional<EValue> IRGen::callBuiltin(const CallExpr &c, const Builtin &b, Env &env,
                                         const std::string &nameHint) {
  std::vector<const CallArg *> args(b.params.size(), nullptr);
  size_t positional = 0;
  for (const CallArg &a : c.args) {
    int idx = a.name.empty() ? static_cast<int>(positional++) : b.paramIndex(a.name);
    if (idx >= 0 && idx < static_cast<int>(args.size()))
      args[idx] = &a;
  }
  std::vector<Value *> tensors;
  AttrMap attrs;
  for (size_t i = 0; i < b.params.size(); ++i) {
    const BuiltinParam &p = b.params[i];
    const CallArg *a = args[i];
    if (!a) {
      switch (p.kind) {
      case ArgKind::Real:
        attrs[p.name] = p.realDefault;
        break;
      case ArgKind::Bool:
        attrs[p.name] = p.boolDefault;
        break;
      case ArgKind::Word:
        attrs[p.name] = EnumWord{p.wordDefault};
        break;
      default:
        break;
      }
      continue;
    }
    const ExprAST &ae = *a->value;
    if (p.kind == ArgKind::Word) {
      attrs[p.name] = EnumWord{llvm::cast<IdentExpr>(ae).name};
      continue;
    }
    if (p.kind == ArgKind::Dim) {
      auto d = evalSize(ae, env, p.name);
      if (!d)
        return std::nullopt;
      attrs[p.name] = *d;
      continue;
    }
    auto v = eval(ae, env);
    if (!v)
      return std::nullopt;
    bool kindOk = (p.kind == ArgKind::Tensor && v->kind == EValue::Kind::Tensor) ||
                  (p.kind == ArgKind::Bool && v->kind == EValue::Kind::Bool) ||
                  (p.kind == ArgKind::Real &&
                   (v->kind == EValue::Kind::Real || v->kind == EValue::Kind::Dim));
    if (!kindOk) {
      error(ae.loc(),
            std::string("argument '") + p.name + "' of " + b.name + " must be a " +
                argKindName(p.kind).str() + ", got a " + kindName(v->kind),
            ae.range);
      return std::nullopt;
    }
    if (p.kind == ArgKind::Tensor)
      tensors.push_back(v->tensor);
    else if (p.kind == ArgKind::Bool)
      attrs[p.name] = v->flag;
    else {
      auto r = v->kind == EValue::Kind::Real ? std::optional<double>(v->real)
                                             : exprToDouble(m->symbols.bindAll(v->dim));
      if (r && !std::isfinite(*r)) {
        error(ae.loc(), std::string("argument '") + p.name + "' is out of range", ae.range);
        return std::nullopt;
      }
      if (!r) {
        error(ae.loc(), std::string("argument '") + p.name + "' must be a constant number",
              ae.range);
        return std::nullopt;
      }
      attrs[p.name] = *r;
    }
  }
  if (b.kind == OpKind::Attention) {
    if (tensors.size() == 2) {
      error(c.calleeRange.Start, "attention takes a fused qkv tensor or all of q, k and v",
            c.calleeRange);
      return std::nullopt;
    }
    if (!attrs.count("kv_heads"))
      attrs["kv_heads"] = attrs["heads"];
  }

  std::string hint = nameHint.empty() ? b.name : nameHint;
  llvm::SMLoc loc = c.calleeRange.Start;
  // Parameters come first so the op that uses them follows their definition.
  std::vector<Value *> params;
  auto flag = [&](const char *name) {
    auto it = attrs.find(name);
    return it != attrs.end() && std::get<bool>(it->second);
  };
  switch (b.kind) {
  case OpKind::Embedding:
  case OpKind::PositionEmbedding:
  case OpKind::RMSNorm:
    params.push_back(newParam(paramPrefix(hint), "weight", loc));
    break;
  case OpKind::LayerNorm:
  case OpKind::Linear: {
    std::string prefix = paramPrefix(hint);
    params.push_back(newParam(prefix, "weight", loc));
    if (flag("bias"))
      params.push_back(newParam(prefix, "bias", loc));
    break;
  }
  case OpKind::LMHead:
    if (flag("tied")) {
      Value *table = nullptr;
      unsigned count = 0;
      for (auto &op : m->pre.fwd.ops)
        if (op->kind == OpKind::Embedding) {
          table = op->operands.size() > 1 ? op->operands[1] : nullptr;
          ++count;
        }
      if (region->kind != RegionKind::Post || count != 1 || !table) {
        error(loc,
              "a tied lm_head must be in the post section of a model whose pre section has "
              "exactly one embedding",
              c.calleeRange);
        return std::nullopt;
      }
      params.push_back(table);
    } else {
      params.push_back(newParam(paramPrefix(hint), "weight", loc));
    }
    break;
  default:
    break;
  }
  Op *op = newOp(b.kind, loc);
  op->operands = tensors;
  op->operands.insert(op->operands.end(), params.begin(), params.end());
  op->attrs = std::move(attrs);
  Value *main = newValue(hint, op);
  for (const char *suffix : extraResultSuffixes(op->kind, op->attrs))
    newValue(main->name + suffix, op);
  return EValue::ofTensor(main);
}

bool IRGen::runStmts(const StmtList &stmts, Env &env, std::optional<EValue> *ret) {
  for (const StmtAST &s : stmts) {
    auto v = eval(*s.value, env, s.isReturn ? "" : s.target);
    if (!v)
      return false;
    if (s.isReturn) {
      if (!ret)
        return error(s.loc, "return is only allowed at the end of a block or the post section");
      *ret = *v;
    } else {
      env[s.target] = *v;
    }
  }
  return true;
}

bool IRGen::genModel(const ModelDecl &tmpl, Env &base) {
  for (const InputAST &in : tmpl.inputs) {
    auto dt = parseDType(in.dtype);
    if (!dt)
      return error(in.dtypeRange.Start,
                   "unknown element type '" + in.dtype + "' (expected bf16, f16, f32, i32 or u8)",
                   in.dtypeRange);
    auto v = std::make_unique<Value>();
    v->name = m->uniqueName(in.name);
    v->typed = true;
    v->type.dtype = *dt;
    for (auto &d : in.dims) {
      auto e = evalSize(*d, base, "an input dimension");
      if (!e)
        return false;
      v->type.shape.push_back(*e);
    }
    base[in.name] = EValue::ofTensor(v.get());
    m->inputs.push_back(std::move(v));
  }

  // pre
  region = &m->pre;
  Env preEnv = base;
  if (!runStmts(tmpl.pre, preEnv, nullptr))
    return false;

  // The layer carries every tensor of pre that the repeat section reassigns.
  std::vector<std::string> carried;
  for (const StmtAST &s : tmpl.body) {
    if (s.isReturn || llvm::is_contained(carried, s.target))
      continue;
    auto it = preEnv.find(s.target);
    if (it != preEnv.end() && it->second.kind == EValue::Kind::Tensor && !base.count(s.target))
      carried.push_back(s.target);
  }
  if (carried.empty())
    return error(tmpl.repeatLoc, "the repeat section must update a tensor computed in pre "
                                 "(for example 'x = my_layer(x)')");
  for (const std::string &c : carried)
    m->pre.fwd.yields.push_back(preEnv[c].tensor);

  // layer
  region = &m->layer;
  auto count = evalSize(*tmpl.repeatCount, base, "the repeat count");
  if (!count)
    return false;
  m->layer.repeat = *count;
  Env layerEnv = base;
  for (const std::string &c : carried) {
    m->layer.fwd.args.push_back(std::make_unique<Value>());
    Value *arg = m->layer.fwd.args.back().get();
    arg->name = m->uniqueName(c);
    layerEnv[c] = EValue::ofTensor(arg);
  }
  if (!runStmts(tmpl.body, layerEnv, nullptr))
    return false;
  for (const std::string &c : carried) {
    if (layerEnv[c].kind != EValue::Kind::Tensor)
      return error(tmpl.repeatLoc, "'" + c + "' must stay a tensor in the repeat section");
    m->layer.fwd.yields.push_back(layerEnv[c].tensor);
  }

  // post
  region = &m->post;
  for (const StmtAST &s : tmpl.body)
    if (!s.isReturn && !llvm::is_contained(carried, s.target))
      repeatLocals.push_back(s.target);
  Env postEnv = base;
  for (const std::string &c : carried) {
    m->post.fwd.args.push_back(std::make_unique<Value>());
    Value *arg = m->post.fwd.args.back().get();
    arg->name = m->uniqueName(c);
    postEnv[c] = EValue::ofTensor(arg);
  }
  std::optional<EValue> loss;
  if (!runStmts(tmpl.post, postEnv, &loss))
    return false;
  if (!loss || loss->kind != EValue::Kind::Tensor)
    return error(tmpl.postLoc, "the post section must return the loss tensor");
  m->post.fwd.yields.push_back(loss->tensor);
  return true;
}

std::unique_ptr<Module> IRGen::run() {
  const InstanceDecl *inst = pickInstance();
  if (!inst)
    return nullptr;
  auto it = prog.models.find(inst->call->callee);
  if (it == prog.models.end()) {
    error(inst->call->calleeRange.Start, "unknown model template '" + inst->call->callee + "'");
    return nullptr;
  }
  m = std::make_unique<Module>();
  m->name = inst->name;
  Env base;
  if (!evalTrain() || !bindParams(*it->second, *inst, base) || !genModel(*it->second, base))
    return nullptr;
  return std::move(m);
}

} // namespace

std::unique_ptr<Module> mist::generateIR(const Program &program, const GenOptions &opts,
                                         DiagnosticEngine &diag) {
  return IRGen(program, opts, diag).run();
}
