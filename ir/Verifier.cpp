//===- Verifier.cpp - Structural and type invariants of a module ----------===//
#include "ir/Verifier.h"

#include "format/Limits.h"
#include "ir/Printer.h"

#include <cmath>
#include <unordered_set>

using namespace mist;

namespace {

class Verifier {
public:
  Verifier(const Module &m, DiagnosticEngine &diag) : m(m), diag(diag) {}

  LogicalResult run() {
    if (!m.symbols.ofKind(SymbolKind::Batch))
      fail({}, "module '" + m.name + "' declares no batch symbol");
    for (auto &in : m.inputs) {
      checkTyped(*in, {});
      global.insert(in.get());
    }
    for (const Region *r : m.regions)
      verifyRegion(*r);
    verifyInterfaces();
    verifyTrain();
    return ok ? success() : failure();
  }

private:
  void fail(llvm::SMLoc loc, const llvm::Twine &msg) {
    diag.error(loc, "verifier: " + msg);
    ok = false;
  }
  void checkTyped(const Value &v, llvm::SMLoc loc) {
    if (m.state.shaped && !v.typed)
      fail(loc, "value '%" + v.name + "' has no type after shape inference");
  }

  void verifyOps(const Block &b, std::unordered_set<const Value *> &scope, const Region &r) {
    for (auto &arg : b.args) {
      checkTyped(*arg, {});
      scope.insert(arg.get());
    }
    for (auto &op : b.ops) {
      for (const Value *v : op->operands) {
        if (!scope.count(v) && !global.count(v) &&
            !(r.kind == RegionKind::Post && preParams.count(v)))
          fail(op->loc, "operand '%" + v->name + "' of " + opName(op->kind) +
                            " is not defined before it in this region");
        if (v->typed && v->type.partial && op->kind != OpKind::AllReduce &&
            op->kind != OpKind::ReduceScatter && op->kind != OpKind::GradAdd)
          fail(op->loc, "partial sum '%" + v->name + "' feeds " + opName(op->kind) +
                            "; only all_reduce, reduce_scatter (or grad_add) may consume it");
      }
      if (op->results.empty())
        fail(op->loc, opName(op->kind) + " defines no value");
      // An op's sizes shape its parameters: never the micro-batch's.
      if (const Symbol *batch = m.symbols.ofKind(SymbolKind::Batch))
        for (const auto &[name, attr] : op->attrs)
          if (const Expr *e = std::get_if<Expr>(&attr); e && e->has(batch->sym))
            fail(op->loc, "attribute '" + name + "' of " + opName(op->kind).str() +
                              " depends on the micro-batch size '" + batch->name + "'");
      // Flags are read with a default (Op::boolAttr): another kind of value
      // would silently read as the default.
      for (const char *flag : {"approximate", "bias", "causal", "flash", "tied", "sequence_split"})
        if (const Attr *a = op->attr(flag); a && !std::holds_alternative<bool>(*a))
          fail(op->loc, std::string("attribute '") + flag + "' of " + opName(op->kind).str() +
                            " must be true or false");
      checkAttributeKinds(*op);
      if (op->operands.size() < minOperands(op->kind))
        fail(op->loc, opName(op->kind) + " needs at least " +
                          std::to_string(minOperands(op->kind)) + " operands");
      for (auto &res : op->results) {
        checkTyped(*res, op->loc);
        if (res->def != op.get())
          fail(op->loc, "result '%" + res->name + "' does not point back to its op");
        scope.insert(res.get());
      }
      if (op->kind == OpKind::Param) {
        if (res0(*op).typed && res0(*op).type.role != Role::Param)
          fail(op->loc, "param '%" + res0(*op).name + "' must have the param role");
        if (r.kind == RegionKind::Pre)
          preParams.insert(op->result());
      }
    }
    for (const Value *y : b.yields)
      if (!scope.count(y))
        fail(r.loc, "yielded value '%" + y->name + "' is not defined in the " + regionName(r.kind) +
                        " region");
  }
  /// Attributes are read by kind (Op::realAttr, dimAttr, enumAttr), each
  /// with a default: one of another kind would silently read as the
  /// default (`theta = 500000` is a size, and rope would use 10000). So each
  /// known attribute must be of its kind and in its range, as sema makes
  /// them from a .mist file; an attention's query heads must divide by its
  /// key/value heads.
  void checkAttributeKinds(const Op &op) {
    const std::string what = " of " + opName(op.kind).str();
    for (const char *name : {"eps", "theta", "p", "dropout"})
      if (const Attr *a = op.attr(name)) {
        const double *v = std::get_if<double>(a);
        const bool probability = std::string(name) == "p" || std::string(name) == "dropout";
        if (!v)
          fail(op.loc, std::string("attribute '") + name + "'" + what +
                           " must be a real number, such as 1.0");
        else if (!std::isfinite(*v) || (probability && !(*v >= 0 && *v < 1)))
          fail(op.loc, std::string("attribute '") + name + "'" + what +
                           (probability ? " must be a probability in [0, 1)" : " must be finite"));
      }
    for (const char *name : {"heads", "kv_heads", "head_dim", "rotary_dim", "start", "size"})
      if (const Attr *a = op.attr(name)) {
        const Expr *e = std::get_if<Expr>(a);
        if (!e) {
          fail(op.loc, std::string("attribute '") + name + "'" + what + " must be a size");
          continue;
        }
        std::optional<int64_t> n = exprToInt(*e);
        if (n && (*n < 0 || (*n == 0 && std::string(name) != "start")))
          fail(op.loc, std::string("attribute '") + name + "'" + what + " must be positive");
      }
    if (const Attr *a = op.attr("shard")) {
      // The words of frontend/Builtins.cpp's signatures, per op.
      const bool linear = op.kind == OpKind::Linear || op.kind == OpKind::LinearGrad;
      const EnumWord *w = std::get_if<EnumWord>(a);
      const bool ok = w && (w->word == "none" || (linear ? w->word == "column" || w->word == "row"
                                                         : w->word == "vocab"));
      if (!ok)
        fail(op.loc, "attribute 'shard'" + what + " must be " +
                         (linear ? "none, column or row" : "none or vocab"));
    }
    if (op.kind == OpKind::Attention || op.kind == OpKind::AttentionGrad) {
      std::optional<Expr> heads = op.dimAttr("heads"), kv = op.dimAttr("kv_heads");
      const int64_t h = heads ? exprToInt(*heads).value_or(0) : 0,
                    k = kv ? exprToInt(*kv).value_or(0) : 0;
      if (h > 0 && k > 0 && h % k != 0)
        fail(op.loc, "attention: " + std::to_string(h) + " query heads do not divide into " +
                         std::to_string(k) + " key/value heads");
    }
  }

  /// Operands the cost model and later passes index without checking.
  static size_t minOperands(OpKind k) {
    switch (k) {
    case OpKind::LinearGrad:
    case OpKind::LMHeadGrad:
    case OpKind::CrossEntropyGrad:
    case OpKind::EmbeddingGrad:
      return 2;
    case OpKind::AttentionGrad:
      return 2;
    case OpKind::AllReduce:
    case OpKind::AllGather:
    case OpKind::ReduceScatter:
    case OpKind::TpCopy:
      return 1;
    case OpKind::GradAdd:
      return 2;
    default:
      return 0;
    }
  }
  static const Value &res0(const Op &op) { return *op.results[0]; }
  /// Where a value is defined, when an op defines it (not for arguments).
  static llvm::SMLoc locOf(const Value *v) { return v->def ? v->def->loc : llvm::SMLoc(); }

  void verifyRegion(const Region &r) {
    std::unordered_set<const Value *> scope;
    verifyOps(r.fwd, scope, r);
    if (m.state.differentiated && !r.bwd)
      fail(r.loc, "region '" + std::string(regionName(r.kind)) + "' has no backward block");
    if (r.bwd) {
      if (r.bwd->args.size() != r.fwd.yields.size())
        fail(r.loc, "backward of '" + std::string(regionName(r.kind)) + "' takes " +
                        std::to_string(r.bwd->args.size()) + " gradients for " +
                        std::to_string(r.fwd.yields.size()) + " yielded values");
      if (r.bwd->yields.size() != r.fwd.args.size())
        fail(r.loc, "backward of '" + std::string(regionName(r.kind)) + "' yields " +
                        std::to_string(r.bwd->yields.size()) + " gradients for " +
                        std::to_string(r.fwd.args.size()) + " arguments");
      verifyOps(*r.bwd, scope, r);
    }
    if (r.kind == RegionKind::Layer && !exprToInt(m.symbols.bindAll(r.repeat)))
      fail(r.loc, "the layer repeat count must have a value");
  }

  /// What the front end enforces of the train section and the sizes, so
  /// that textual IR (-x ir) is held to the same rules as a .mist file.
  void verifyTrain() {
    const TrainConfig &t = m.train;
    auto require = [&](bool holds, const std::string &what, double value) {
      if (!holds)
        fail(t.loc, "train: " + what + " (" + formatReal(value) + ")");
    };
    require(t.lr > 0, "lr must be positive", t.lr);
    require(t.gradClip > 0, "grad_clip must be positive", t.gradClip);
    require(t.eps > 0, "eps must be positive", t.eps);
    require(t.weightDecay >= 0, "weight_decay must not be negative", t.weightDecay);
    require(t.beta1 >= 0 && t.beta1 < 1, "beta1 must lie in [0, 1)", t.beta1);
    require(t.beta2 >= 0 && t.beta2 < 1, "beta2 must lie in [0, 1)", t.beta2);
    require(t.globalBatch >= 0 && t.globalBatch <= limits::maxCount,
            "global_batch must lie in [0, 16,777,216]", double(t.globalBatch));
    require(t.warmupSteps >= 0, "warmup_steps must not be negative", double(t.warmupSteps));
    if (!isLrDecay(t.lrDecay))
      fail(t.loc, "train: lr_decay '" + t.lrDecay + "' is not cosine, linear, constant or wsd");
    if (t.minLr)
      require(*t.minLr >= 0 && *t.minLr <= t.lr, "min_lr must lie in [0, lr]", *t.minLr);
    if (t.decayFraction) {
      require(*t.decayFraction > 0 && *t.decayFraction <= 1, "decay_fraction must lie in (0, 1]",
              *t.decayFraction);
      if (t.lrDecay != "wsd")
        fail(t.loc, "train: decay_fraction applies to lr_decay = \"wsd\" only");
    }
    if (dtypeBytes(t.gradientDtype()) < dtypeBytes(t.dtype))
      fail(t.loc, "train: grad_dtype " + dtypeName(t.gradientDtype()).str() +
                      " is narrower than the weights' dtype " + dtypeName(t.dtype).str());
    if (const Symbol *seq = m.symbols.ofKind(SymbolKind::Seq); seq && seq->value)
      require(*seq->value >= 1 && *seq->value <= limits::maxCount,
              "the sequence length must lie in [1, 16,777,216]", double(*seq->value));
    if (auto layers = exprToInt(m.symbols.bindAll(m.layer.repeat));
        layers && !(*layers >= 1 && *layers <= limits::maxLayers))
      fail(m.layer.loc,
           "the layer repeat count must lie in [1, 1,000,000] (" + std::to_string(*layers) + ")");
  }

  void verifyInterfaces() {
    auto match = [&](const Region &fromRegion, const Region &toRegion, const char *what) {
      const Block &from = fromRegion.fwd, &to = toRegion.fwd;
      if (from.yields.size() != to.args.size()) {
        fail(fromRegion.loc, std::string(what) + ": " + std::to_string(from.yields.size()) +
                                 " values flow into " + std::to_string(to.args.size()) +
                                 " arguments");
        return;
      }
      for (size_t i = 0; i < to.args.size(); ++i) {
        const Value *y = from.yields[i], *a = to.args[i].get();
        if (y->typed && a->typed && !y->type.equals(a->type))
          fail(locOf(y), std::string(what) + ": '%" + y->name + "' is " + y->type.str(m.symbols) +
                             " but '%" + a->name + "' is " + a->type.str(m.symbols));
      }
    };
    match(m.pre, m.layer, "pre -> layer");
    match(m.layer, m.layer, "layer -> layer");
    match(m.layer, m.post, "layer -> post");
    if (m.post.fwd.yields.size() != 1) {
      fail(m.post.loc, "the post region must yield exactly one value, the loss");
    } else if (const Value *loss = m.post.fwd.yields[0];
               loss->typed && (loss->type.rank() != 0 || loss->type.dtype != DType::F32)) {
      fail(locOf(loss),
           "the loss '%" + loss->name + "' must be a f32 scalar, got " + loss->type.str(m.symbols));
    }
  }

  const Module &m;
  DiagnosticEngine &diag;
  std::unordered_set<const Value *> global, preParams;
  bool ok = true;
};

} // namespace

LogicalResult mist::verifyModule(const Module &m, DiagnosticEngine &diag) {
  return Verifier(m, diag).run();
}
