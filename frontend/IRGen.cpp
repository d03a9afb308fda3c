//===- IRGen.cpp - Instantiates a model of the program as IR --------------===//
#include "frontend/IRGen.h"

#include "frontend/IRGenContext.h"

#include "format/Limits.h"
#include "llvm/ADT/ScopeExit.h"
#include <cmath>
#include <map>

using namespace mist;

namespace mist::irgen {

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

} // namespace mist::irgen

using namespace mist::irgen;

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

bool IRGen::checkPositive(const Expr &d, const ExprAST &at, bool zeroAllowed) {
  Expr bound = m->symbols.bindAll(d, {{m->symbols.lookup("b")->sym, 1}});
  auto i = exprToInt(bound);
  if (!i || *i < (zeroAllowed ? 0 : 1))
    return error(at.loc(),
                 "size " + str(d) + " must be a " + (zeroAllowed ? "non-negative" : "positive") +
                     " whole number, but it is " + str(bound),
                 at.range);
  return true;
}

std::optional<Expr> IRGen::evalSize(const ExprAST &e, Env &env, const char *what,
                                    bool zeroAllowed) {
  auto v = eval(e, env);
  if (!v)
    return std::nullopt;
  if (v->kind != EValue::Kind::Dim) {
    error(e.loc(), std::string(what) + " must be a size, got a " + kindName(v->kind), e.range);
    return std::nullopt;
  }
  if (!checkPositive(v->dim, e, zeroAllowed))
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
    if (n->text.size() > limits::maxIntegerDigits) {
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

namespace {

/// The call's argument for each of the builtin's parameters (null where it
/// was left out): positional ones in order, named ones by name.
std::vector<const CallArg *> matchBuiltinArgs(const CallExpr &c, const Builtin &b) {
  std::vector<const CallArg *> args(b.params.size(), nullptr);
  size_t positional = 0;
  for (const CallArg &a : c.args) {
    int idx = a.name.empty() ? static_cast<int>(positional++) : b.paramIndex(a.name);
    if (idx >= 0 && idx < static_cast<int>(args.size()))
      args[idx] = &a;
  }
  return args;
}

/// A left-out attribute parameter takes its default; a tensor or size has
/// none (Sema has already reported a missing one).
void setDefaultAttr(const BuiltinParam &p, AttrMap &attrs) {
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
}

} // namespace

bool IRGen::evalBuiltinArg(const Builtin &b, const BuiltinParam &p, const ExprAST &ae, Env &env,
                           std::vector<Value *> &tensors, AttrMap &attrs) {
  if (p.kind == ArgKind::Word) {
    attrs[p.name] = EnumWord{llvm::cast<IdentExpr>(ae).name};
    return true;
  }
  if (p.kind == ArgKind::Dim || p.kind == ArgKind::Offset) {
    auto d = evalSize(ae, env, p.name, p.kind == ArgKind::Offset);
    if (!d)
      return false;
    // An op's sizes shape its parameters and its slices: they cannot change
    // with the micro-batch (a slice sized by it would run past its axis, a
    // weight would change shape with the plan).
    if (const Symbol *batch = m->symbols.ofKind(SymbolKind::Batch); batch && d->has(batch->sym))
      return error(ae.loc(),
                   std::string("argument '") + p.name + "' of " + b.name + " depends on the " +
                       "micro-batch size '" + batch->name + "'; an op's sizes must not",
                   ae.range);
    attrs[p.name] = *d;
    return true;
  }
  auto v = eval(ae, env);
  if (!v)
    return false;
  bool kindOk =
      (p.kind == ArgKind::Tensor && v->kind == EValue::Kind::Tensor) ||
      (p.kind == ArgKind::Bool && v->kind == EValue::Kind::Bool) ||
      (p.kind == ArgKind::Real && (v->kind == EValue::Kind::Real || v->kind == EValue::Kind::Dim));
  if (!kindOk)
    return error(ae.loc(),
                 std::string("argument '") + p.name + "' of " + b.name + " must be a " +
                     argKindName(p.kind).str() + ", got a " + kindName(v->kind),
                 ae.range);
  if (p.kind == ArgKind::Tensor)
    tensors.push_back(v->tensor);
  else if (p.kind == ArgKind::Bool)
    attrs[p.name] = v->flag;
  else {
    // A real attribute may be given as a size: it must bind to a finite constant.
    auto r = v->kind == EValue::Kind::Real ? std::optional<double>(v->real)
                                           : exprToDouble(m->symbols.bindAll(v->dim));
    if (r && !std::isfinite(*r))
      return error(ae.loc(), std::string("argument '") + p.name + "' is out of range", ae.range);
    if (!r)
      return error(ae.loc(), std::string("argument '") + p.name + "' must be a constant number",
                   ae.range);
    attrs[p.name] = *r;
  }
  return true;
}

std::optional<Value *> IRGen::tiedEmbeddingTable(const CallExpr &c, llvm::SMLoc loc) {
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
  return table;
}

std::optional<std::vector<Value *>> IRGen::builtinParams(const CallExpr &c, const Builtin &b,
                                                         const AttrMap &attrs,
                                                         const std::string &hint, llvm::SMLoc loc) {
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
      std::optional<Value *> table = tiedEmbeddingTable(c, loc);
      if (!table)
        return std::nullopt;
      params.push_back(*table);
    } else {
      params.push_back(newParam(paramPrefix(hint), "weight", loc));
    }
    break;
  default:
    break;
  }
  return params;
}

std::optional<EValue> IRGen::callBuiltin(const CallExpr &c, const Builtin &b, Env &env,
                                         const std::string &nameHint) {
  std::vector<const CallArg *> args = matchBuiltinArgs(c, b);
  std::vector<Value *> tensors;
  AttrMap attrs;
  for (size_t i = 0; i < b.params.size(); ++i) {
    if (!args[i])
      setDefaultAttr(b.params[i], attrs);
    else if (!evalBuiltinArg(b, b.params[i], *args[i]->value, env, tensors, attrs))
      return std::nullopt;
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
  std::optional<std::vector<Value *>> params = builtinParams(c, b, attrs, hint, loc);
  if (!params)
    return std::nullopt;
  Op *op = newOp(b.kind, loc);
  op->operands = tensors;
  op->operands.insert(op->operands.end(), params->begin(), params->end());
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

bool IRGen::genInputs(const ModelDecl &tmpl, Env &base) {
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
  return true;
}

namespace {

/// The tensors of pre that the repeat section reassigns: the layer carries
/// them (in the order the repeat section first assigns them).
std::vector<std::string> carriedTensors(const ModelDecl &tmpl, const Env &preEnv, const Env &base) {
  std::vector<std::string> carried;
  for (const StmtAST &s : tmpl.body) {
    if (s.isReturn || llvm::is_contained(carried, s.target))
      continue;
    auto it = preEnv.find(s.target);
    if (it != preEnv.end() && it->second.kind == EValue::Kind::Tensor && !base.count(s.target))
      carried.push_back(s.target);
  }
  return carried;
}

} // namespace

Env IRGen::bindCarriedArgs(Block &fwd, const std::vector<std::string> &carried, const Env &base) {
  Env env = base;
  for (const std::string &c : carried) {
    fwd.args.push_back(std::make_unique<Value>());
    Value *arg = fwd.args.back().get();
    arg->name = m->uniqueName(c);
    env[c] = EValue::ofTensor(arg);
  }
  return env;
}

bool IRGen::genLayer(const ModelDecl &tmpl, Env &base, const std::vector<std::string> &carried) {
  region = &m->layer;
  auto count = evalSize(*tmpl.repeatCount, base, "the repeat count");
  if (!count)
    return false;
  // Bounded here so that parameter counts and the tuner's layer splits fit.
  const Expr layers = m->symbols.bindAll(*count);
  const std::optional<int64_t> n = exprToInt(layers);
  if ((n && *n > limits::maxLayers) || (!n && isHugePositiveInteger(layers)))
    return error(tmpl.repeatLoc,
                 fmt::format("the repeat count ({}) is more than the {} layers mistc accepts",
                             n ? groupDigits(*n) : str(layers), groupDigits(limits::maxLayers)));
  m->layer.repeat = *count;
  m->layer.loc = tmpl.repeatLoc;
  Env layerEnv = bindCarriedArgs(m->layer.fwd, carried, base);
  if (!runStmts(tmpl.body, layerEnv, nullptr))
    return false;
  for (const std::string &c : carried) {
    if (layerEnv[c].kind != EValue::Kind::Tensor)
      return error(tmpl.repeatLoc, "'" + c + "' must stay a tensor in the repeat section");
    m->layer.fwd.yields.push_back(layerEnv[c].tensor);
  }
  return true;
}

bool IRGen::genPost(const ModelDecl &tmpl, Env &base, const std::vector<std::string> &carried) {
  region = &m->post;
  for (const StmtAST &s : tmpl.body)
    if (!s.isReturn && !llvm::is_contained(carried, s.target))
      repeatLocals.push_back(s.target);
  Env postEnv = bindCarriedArgs(m->post.fwd, carried, base);
  std::optional<EValue> loss;
  if (!runStmts(tmpl.post, postEnv, &loss))
    return false;
  if (!loss || loss->kind != EValue::Kind::Tensor)
    return error(tmpl.postLoc, "the post section must return the loss tensor");
  m->post.fwd.yields.push_back(loss->tensor);
  return true;
}

bool IRGen::genModel(const ModelDecl &tmpl, Env &base) {
  if (!genInputs(tmpl, base))
    return false;

  region = &m->pre;
  Env preEnv = base;
  if (!runStmts(tmpl.pre, preEnv, nullptr))
    return false;
  std::vector<std::string> carried = carriedTensors(tmpl, preEnv, base);
  if (carried.empty())
    return error(tmpl.repeatLoc, "the repeat section must update a tensor computed in pre "
                                 "(for example 'x = my_layer(x)')");
  for (const std::string &c : carried)
    m->pre.fwd.yields.push_back(preEnv[c].tensor);

  return genLayer(tmpl, base, carried) && genPost(tmpl, base, carried);
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
  // Errors inside the template (an import's file) are this instance's.
  DiagnosticEngine::InstanceScope scope(diag,
                                        {inst->call->range.Start, inst->call->range, inst->name});
  m = std::make_unique<Module>();
  m->name = inst->name;
  m->loc = inst->nameRange.Start;
  m->instanceRange = inst->call->range;
  Env base;
  if (!evalTrain() || !bindParams(*it->second, *inst, base) || !genModel(*it->second, base))
    return nullptr;
  return std::move(m);
}

std::unique_ptr<Module> mist::generateIR(const Program &program, const GenOptions &opts,
                                         DiagnosticEngine &diag) {
  return IRGen(program, opts, diag).run();
}
