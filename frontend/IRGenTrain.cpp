//===- IRGenTrain.cpp - The instance, its parameters and train section ----===//
#include "frontend/IRGenContext.h"
#include "frontend/Vocabulary.h"

#include "format/Cluster.h"
#include "format/Limits.h"
#include "ir/Printer.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"
#include <algorithm>
#include <cmath>

using namespace mist;
using namespace mist::irgen;

namespace {

/// The message for a real setting the trainer's float cannot hold, or "".
std::string floatProblem(const std::string &name, double v) {
  if (limits::fitsFloat(v))
    return "";
  return name + " (" + formatReal(v) +
         ") does not fit the 32-bit float the trainer computes it in: it would become " +
         (std::fabs(v) < 1 ? "0" : "inf") + " (use a value between 1.2e-38 and 3.4e+38)";
}

} // namespace

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

std::string IRGen::clusterRelativeTo(const std::string &cluster, llvm::SMLoc where) const {
  llvm::StringRef c(cluster);
  if (!namesClusterFile(cluster) || llvm::sys::path::is_absolute(c))
    return cluster; // a preset name, or an absolute path
  // A file relative to the .mist file that names it, as imports are.
  unsigned buffer = diag.sourceMgr().FindBufferContainingLoc(where);
  llvm::SmallString<256> resolved(llvm::sys::path::parent_path(
      diag.sourceMgr().getMemoryBuffer(buffer)->getBufferIdentifier()));
  llvm::sys::path::append(resolved, c);
  return std::string(resolved);
}

bool IRGen::evalOptimizerSetting(const CallArg &a) {
  TrainConfig &t = m->train;
  Env empty;
  if (a.name.empty())
    return error(a.value->loc(), "optimizer arguments must be named");
  if (a.name == "betas") {
    auto *tup = llvm::dyn_cast<TupleExpr>(a.value.get());
    if (!tup || tup->elements.size() != 2)
      return error(a.value->loc(), "betas must be a pair such as (0.9, 0.95)", a.value->range);
    auto b1 = evalRealArg(*tup->elements[0], empty, "beta1");
    auto b2 = b1 ? evalRealArg(*tup->elements[1], empty, "beta2") : std::nullopt;
    if (!b2)
      return false;
    if (*b1 < 0 || *b1 >= 1 || *b2 < 0 || *b2 >= 1)
      return error(a.value->loc(), "betas must lie in [0, 1)", a.value->range);
    t.beta1 = *b1;
    t.beta2 = *b2;
    return true;
  }
  if (a.name == "no_decay")
    return evalNoDecay(*a.value);
  double *slot = a.name == "lr"                               ? &t.lr
                 : a.name == "weight_decay" || a.name == "wd" ? &t.weightDecay
                 : a.name == "eps"                            ? &t.eps
                                                              : nullptr;
  if (!slot)
    return error(a.nameRange.Start,
                 "unknown optimizer setting '" + a.name + "' (expected " +
                     joinedNames(optimizerSettings) + ")",
                 a.nameRange);
  auto r = evalRealArg(*a.value, empty, a.name.c_str());
  if (!r)
    return false;
  if (*r < 0 || (a.name != "weight_decay" && a.name != "wd" && *r == 0))
    return error(a.value->loc(), a.name + " must be positive", a.value->range);
  if (std::string problem = floatProblem(a.name, *r); !problem.empty())
    return error(a.value->loc(), problem, a.value->range);
  *slot = *r;
  return true;
}

// no_decay = (bias, norm, embedding): the kinds of parameters AdamW does
// not decay; one kind alone needs no parentheses, `none` decays everything.
bool IRGen::evalNoDecay(const ExprAST &v) {
  TrainConfig &t = m->train;
  std::vector<const ExprAST *> items;
  if (auto *tup = llvm::dyn_cast<TupleExpr>(&v))
    for (const auto &e : tup->elements)
      items.push_back(e.get());
  else
    items.push_back(&v);
  bool biases = true, norms = true, embeddings = true;
  for (const ExprAST *item : items) {
    auto *id = llvm::dyn_cast<IdentExpr>(item);
    const std::string name = id ? id->name : "";
    bool *decays = name == "bias"        ? &biases
                   : name == "norm"      ? &norms
                   : name == "embedding" ? &embeddings
                                         : nullptr;
    if (name == "none" && items.size() == 1)
      continue;
    if (!decays)
      return error(item->loc(),
                   "no_decay names kinds of parameters: bias, norm, embedding (or none), "
                   "e.g. no_decay = (bias, norm)",
                   item->range);
    *decays = false;
  }
  t.decayBiases = biases;
  t.decayNorms = norms;
  t.decayEmbeddings = embeddings;
  return true;
}

bool IRGen::evalOptimizer(const ExprAST &v) {
  std::string name;
  const CallExpr *call = llvm::dyn_cast<CallExpr>(&v);
  if (call)
    name = call->callee;
  else if (auto *id = llvm::dyn_cast<IdentExpr>(&v))
    name = id->name;
  if (std::find(std::begin(optimizerNames), std::end(optimizerNames), name) ==
      std::end(optimizerNames))
    return error(v.loc(), "unknown optimizer; expected adamw(...) or sgd(...)", v.range);
  m->train.optimizer = name;
  if (call)
    for (const CallArg &a : call->args)
      if (!evalOptimizerSetting(a))
        return false;
  return true;
}

bool IRGen::evalTrainEntry(const TrainEntry &e, int64_t &seqLen) {
  TrainConfig &t = m->train;
  Env empty;
  const std::string &k = e.key;
  if (k == "global_batch" || k == "seq_len" || k == "warmup_steps") {
    // No warmup is a valid schedule; a batch or sequence of 0 is not.
    auto v = evalConstInt(*e.value, empty, k.c_str(), /*allowZero=*/k == "warmup_steps");
    if (!v)
      return false;
    if (k != "warmup_steps" && *v > limits::maxCount)
      return error(e.value->loc(),
                   k + " (" + groupDigits(*v) + ") is more than the " +
                       groupDigits(limits::maxCount) + " mistc accepts",
                   e.value->range);
    if (k == "warmup_steps" && *v > limits::maxSteps)
      return error(e.value->loc(),
                   "warmup_steps (" + groupDigits(*v) + ") is more than the " +
                       groupDigits(limits::maxSteps) + " steps the trainer counts",
                   e.value->range);
    (k == "global_batch" ? t.globalBatch : k == "seq_len" ? seqLen : t.warmupSteps) = *v;
  } else if (k == "lr_decay") {
    auto *id = llvm::dyn_cast<IdentExpr>(e.value.get());
    if (!id || !isLrDecay(id->name))
      return error(e.value->loc(), "lr_decay must be one of cosine, linear, constant, wsd",
                   e.value->range);
    t.lrDecay = id->name;
  } else if (k == "min_lr" || k == "decay_fraction") {
    auto v = evalRealArg(*e.value, empty, k.c_str());
    if (!v)
      return false;
    if (k == "min_lr" && !(*v >= 0))
      return error(e.value->loc(), "min_lr must not be negative", e.value->range);
    if (k == "decay_fraction" && !(*v > 0 && *v <= 1))
      return error(e.value->loc(), "decay_fraction must lie in (0, 1]", e.value->range);
    if (std::string problem = floatProblem(k, *v); !problem.empty())
      return error(e.value->loc(), problem, e.value->range);
    (k == "min_lr" ? t.minLr : t.decayFraction) = *v;
  } else if (k == "lr" || k == "grad_clip") {
    auto v = evalRealArg(*e.value, empty, k.c_str());
    if (!v)
      return false;
    if (!(*v > 0))
      return error(e.value->loc(), k + " must be positive", e.value->range);
    if (std::string problem = floatProblem(k, *v); !problem.empty())
      return error(e.value->loc(), problem, e.value->range);
    (k == "lr" ? t.lr : t.gradClip) = *v;
  } else if (k == "dtype" || k == "master_dtype" || k == "grad_dtype") {
    auto *id = llvm::dyn_cast<IdentExpr>(e.value.get());
    auto dt = id ? parseDType(id->name) : std::nullopt;
    if (!dt || *dt == DType::I32 || *dt == DType::U8)
      return error(e.value->loc(), k + " must be one of bf16, f16, f32", e.value->range);
    if (k == "grad_dtype")
      t.gradDtype = *dt;
    else
      (k == "dtype" ? t.dtype : t.masterDtype) = *dt;
    (k == "dtype"        ? t.dtypeLoc
     : k == "grad_dtype" ? t.gradDtypeLoc
                         : t.masterDtypeLoc) = e.value->loc();
  } else if (k == "cluster") {
    auto *str = llvm::dyn_cast<StringExpr>(e.value.get());
    if (!str || str->value.empty())
      return error(e.value->loc(),
                   "cluster must be a preset name or a YAML file in quotes, such as "
                   "cluster = \"a100-40g\"",
                   e.value->range);
    t.cluster = clusterRelativeTo(str->value, e.value->loc());
    t.clusterLoc = e.value->loc();
  } else if (k == "optimizer") {
    return evalOptimizer(*e.value);
  } else {
    return error(e.keyRange.Start,
                 "unknown train setting '" + k + "' (expected " + joinedNames(trainSettings) + ")",
                 e.keyRange);
  }
  return true;
}

bool IRGen::evalTrain() {
  TrainConfig &t = m->train;
  int64_t seqLen = 0;
  inTrain = true;
  auto leaveTrain = llvm::make_scope_exit([&] { inTrain = false; });
  const TrainEntry *gradDtypeEntry = nullptr, *minLrEntry = nullptr, *fractionEntry = nullptr;
  if (prog.train)
    t.loc = prog.train->loc;
  if (const TrainDecl *td = prog.train)
    for (const TrainEntry &e : td->entries) {
      if (!evalTrainEntry(e, seqLen))
        return false;
      if (e.key == "grad_dtype")
        gradDtypeEntry = &e;
      else if (e.key == "min_lr")
        minLrEntry = &e;
      else if (e.key == "decay_fraction")
        fractionEntry = &e;
    }
  // The schedule's settings against each other, once all are known.
  if (minLrEntry && *t.minLr > t.lr)
    return error(minLrEntry->value->loc(),
                 "min_lr (" + formatReal(*t.minLr) + ") is above lr (" + formatReal(t.lr) +
                     "): the schedule decays from lr to min_lr",
                 minLrEntry->value->range);
  if (fractionEntry && t.lrDecay != "wsd")
    return error(fractionEntry->value->loc(),
                 "decay_fraction is the decaying part of a wsd schedule; lr_decay is " + t.lrDecay,
                 fractionEntry->value->range);
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
