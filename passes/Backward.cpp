//===- Backward.cpp - Gradient ops of every region ------------------------===//
/// \file
/// Precondition: shaped. Gives each region a backward block that receives
/// the gradients of the values the forward block yields and yields the
/// gradients of its arguments. Forward ops are visited in reverse; an op
/// with a gradient rule becomes `<op>_grad`, whose operands are the incoming
/// gradient followed by exactly the values the op saves for backward
/// (ir/OpSemantics savedForBackward), and whose results are the gradients of
/// its floating-point operands. `add` and `all_reduce` pass gradients
/// through; `tp_copy` turns into an all_reduce of its (partial) gradient;
/// several contributions to one value are summed with `grad_add`.
/// Under sequence parallelism (passes/SequenceParallel.cpp) an `all_gather`
/// turns into a reduce_scatter of its gradient and a `reduce_scatter` into
/// an all_gather; a backward op that reads an all-gathered value gathers it
/// again (Megatron-LM keeps only the split input), and a parameter read by
/// an op that sees this rank's tokens only gets a partial gradient (summed
/// over tp by the runtime once per step).
/// Parameter gradients have the `grad` role; a parameter used in two regions
/// (tied embedding) gets one gradient per region, summed by the runtime.
//===----------------------------------------------------------------------===//
#include "ir/OpSemantics.h"
#include "passes/Pass.h"
#include <map>

using namespace mist;

namespace {

class BackwardBuilder {
public:
  BackwardBuilder(Module &m, Region &r, DiagnosticEngine &diag) : m(m), r(r), diag(diag) {}

  LogicalResult build() {
    Block &bwd = r.bwd.emplace();
    for (Value *y : r.fwd.yields) {
      auto g = std::make_unique<Value>();
      g->name = m.uniqueName(y->name + ".grad");
      g->type = gradType(*y);
      g->typed = true;
      accumulate(y, g.get());
      bwd.args.push_back(std::move(g));
    }
    for (auto it = r.fwd.ops.rbegin(); it != r.fwd.ops.rend(); ++it)
      if (failed(visit(**it)))
        return failure();
    for (size_t i = 0; i < r.fwd.args.size(); ++i) {
      Value *a = r.fwd.args[i].get();
      auto g = grads.find(a);
      if (g == grads.end()) {
        // Point at what the region computes instead: the value that replaces
        // the argument in the layer, the loss in post.
        Value *out = nullptr;
        if (r.kind == RegionKind::Layer && i < r.fwd.yields.size())
          out = r.fwd.yields[i];
        else if (!r.fwd.yields.empty())
          out = r.fwd.yields[0];
        diag.error(out && out->def ? out->def->loc : llvm::SMLoc(),
                   "no gradient reaches '%" + a->name + "' in the " + regionName(r.kind) +
                       " region: its result does not depend on it");
        return failure();
      }
      bwd.yields.push_back(g->second);
    }
    return success();
  }

private:
  static TensorType gradType(const Value &v) {
    TensorType t = v.type;
    t.role = v.type.role == Role::Param ? Role::Grad : Role::Act;
    t.partial = false;
    return t;
  }

  Op *append(OpKind kind, llvm::SMLoc loc) {
    r.bwd->ops.push_back(std::make_unique<Op>(kind, loc));
    return r.bwd->ops.back().get();
  }
  Value *addResult(Op *op, const std::string &base, TensorType t) {
    auto v = std::make_unique<Value>();
    v->name = m.uniqueName(base);
    v->type = std::move(t);
    v->typed = true;
    v->def = op;
    op->results.push_back(std::move(v));
    return op->results.back().get();
  }

  /// A tp collective of `x` appended to the backward, typed by its rule.
  Value *collective(OpKind kind, Value *x, const std::string &name, llvm::SMLoc loc) {
    Op *c = append(kind, loc);
    c->operands = {x};
    auto v = std::make_unique<Value>();
    v->name = m.uniqueName(name);
    v->def = c;
    c->results.push_back(std::move(v));
    if (failed(inferOpTypes(*c, m, diag)))
      return nullptr;
    return c->result();
  }

  /// `gathered` (an all_gather's result) gathered again in the backward,
  /// once for all the gradient ops that read it.
  Value *regathered(Value *gathered) {
    Value *&again = regathers[gathered];
    if (!again)
      again = collective(OpKind::AllGather, gathered->def->operands[0],
                         gathered->name + ".regathered", gathered->def->loc);
    return again;
  }

  void accumulate(Value *of, Value *g) {
    auto [it, fresh] = grads.emplace(of, g);
    if (fresh)
      return;
    Op *add = append(OpKind::GradAdd, g->def ? g->def->loc : llvm::SMLoc());
    add->operands = {it->second, g};
    TensorType t = g->type;
    t.partial = it->second->type.partial || g->type.partial; // a sum with a partial is partial
    it->second = addResult(add, of->name + ".grad", t);
  }

  LogicalResult visit(Op &op) {
    if (op.kind == OpKind::Param || op.results.empty())
      return success();
    auto g = grads.find(op.result());
    if (g == grads.end())
      return success(); // nothing downstream needs this op's gradient
    Value *dy = g->second;
    switch (op.kind) {
    case OpKind::Add:
      accumulate(op.operands[0], dy);
      accumulate(op.operands[1], dy);
      return success();
    case OpKind::AllReduce:
      accumulate(op.operands[0], dy);
      return success();
    case OpKind::AllGather: {
      // The readers of a gathered value are column-parallel: their input
      // gradients are partial sums over tp.
      if (!dy->type.partial) {
        diag.error(op.loc, "sequence parallelism: the gradient of all_gather '%" +
                               op.result()->name + "' is not a partial sum over tp");
        return failure();
      }
      Value *g = collective(OpKind::ReduceScatter, dy, op.operands[0]->name + ".grad", op.loc);
      if (!g)
        return failure();
      accumulate(op.operands[0], g);
      return success();
    }
    case OpKind::ReduceScatter: {
      Value *g = collective(OpKind::AllGather, dy, op.operands[0]->name + ".grad", op.loc);
      if (!g)
        return failure();
      accumulate(op.operands[0], g);
      return success();
    }
    case OpKind::TpCopy: {
      if (!dy->type.partial) {
        accumulate(op.operands[0], dy);
        return success();
      }
      Op *ar = append(OpKind::AllReduce, op.loc);
      ar->operands = {dy};
      TensorType t = dy->type;
      t.partial = false;
      accumulate(op.operands[0], addResult(ar, op.operands[0]->name + ".grad", t));
      return success();
    }
    default:
      break;
    }
    auto gradKind = gradKindOf(op.kind);
    if (!gradKind) {
      diag.error(op.loc, "no gradient rule for '" + opName(op.kind) + "'");
      return failure();
    }
    // What the op saved; an all-gathered value is gathered again from its
    // split operand, in front of the gradient op.
    std::vector<Value *> reads = {dy};
    SavedSet saved = savedForBackward(op);
    for (unsigned i : saved.operands) {
      Value *v = op.operands[i];
      if (v->def && v->def->kind == OpKind::AllGather && !(v = regathered(v)))
        return failure();
      reads.push_back(v);
    }
    for (unsigned i : saved.results)
      reads.push_back(op.results[i].get());
    Op *bop = append(*gradKind, op.loc);
    bop->attrs = op.attrs;
    bop->operands = std::move(reads);
    // An op that sees this rank's tokens only makes a part of its
    // parameters' gradients.
    bool tokensSplit = false;
    for (const Value *v : op.operands)
      tokensSplit |= v->type.isTokenSplit();
    for (const auto &res : op.results)
      tokensSplit |= res->type.isTokenSplit();
    // The input gradient of a column-parallel matmul is a partial sum over tp.
    bool partialInputGrad = (op.kind == OpKind::Linear || op.kind == OpKind::LMHead) &&
                            op.operands[0]->type.role == Role::Act &&
                            !op.operands[0]->type.isSharded() && op.result()->type.isSharded();
    for (unsigned i = 0; i < op.operands.size(); ++i) {
      Value *x = op.operands[i];
      if (x->type.dtype == DType::I32 || x->type.dtype == DType::U8)
        continue;
      TensorType t = gradType(*x);
      if ((i == 0 && partialInputGrad) || (x->type.role == Role::Param && tokensSplit))
        t.partial = true;
      accumulate(x, addResult(bop, x->name + ".grad", t));
    }
    if (bop->results.empty()) { // e.g. no differentiable operand; keep IR well-formed
      r.bwd->ops.pop_back();
    }
    return success();
  }

  Module &m;
  Region &r;
  DiagnosticEngine &diag;
  std::map<Value *, Value *> grads;
  std::map<Value *, Value *> regathers; ///< all-gathered value -> its backward gather
};

class BackwardPass : public Pass {
public:
  llvm::StringRef argument() const override { return "backward"; }
  bool alreadyApplied(const Module &m) const override { return m.state.differentiated; }

  LogicalResult run(Module &m, DiagnosticEngine &diag) override {
    if (!m.state.shaped) {
      diag.error({}, "backward needs shape-infer to run first");
      return failure();
    }
    if (m.state.differentiated)
      return success();
    for (Region *r : m.regions)
      if (failed(BackwardBuilder(m, *r, diag).build()))
        return failure();
    m.state.differentiated = true;
    m.dropCosts(); // the backward ops have none yet: cost-model runs again
    return success();
  }
};

} // namespace

std::unique_ptr<Pass> mist::createBackwardPass() { return std::make_unique<BackwardPass>(); }
