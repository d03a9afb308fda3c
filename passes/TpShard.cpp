//===- TpShard.cpp - Tensor-parallel sharding and collectives -------------===//
/// \file
/// Precondition: shaped. Marks the module tp-sharded and re-derives every
/// type under the sharding rules (column / row / vocab annotations), then
/// inserts the Megatron collectives:
///   - a `tp_copy` (identity forward, all-reduce of the gradient) in front of
///     every column-parallel linear and vocab-parallel lm_head whose input is
///     replicated; ops reading the same input share one copy;
///   - an `all_reduce` after every op whose result is a partial sum (row
///     linear, vocab-parallel embedding); later uses read the reduced value,
///     which keeps the original name while the partial becomes `<name>.partial`;
///   - cross_entropy over vocab-sharded logits becomes vocab-parallel.
/// After the layer region it checks that the layer still maps its carried
/// types to themselves, so the error points into the layer (the verifier
/// checks it again).
//===----------------------------------------------------------------------===//
#include "ir/OpSemantics.h"
#include "passes/LayerTypes.h"
#include "passes/Pass.h"
#include <map>

using namespace mist;

namespace {

class TpShardPass : public Pass {
public:
  llvm::StringRef argument() const override { return "tp-shard"; }
  bool alreadyApplied(const Module &m) const override { return m.state.tpSharded; }

  LogicalResult run(Module &m, DiagnosticEngine &diag) override {
    if (!m.state.shaped || m.state.differentiated) {
      diag.error({}, "tp-shard runs after shape-infer and before backward");
      return failure();
    }
    if (m.state.tpSharded)
      return success();
    m.state.tpSharded = true;
    m.dropCosts(); // they were computed for the unsharded ops
    for (Region *r : m.regions) {
      for (auto &a : r->fwd.args)
        a->typed = false;
      for (auto &op : r->fwd.ops)
        for (auto &res : op->results)
          res->typed = false;
    }
    std::map<Value *, Value *> replaced;
    for (Region *r : m.regions) {
      if (r->kind != RegionKind::Pre)
        retypeArgs(m, *r);
      if (failed(shardBlock(m, r->fwd, replaced, diag)))
        return failure();
      if (r->kind == RegionKind::Layer &&
          failed(
              checkLayerKeepsTypes(m, diag, "after tensor-parallel sharding the repeated layer")))
        return failure();
    }
    return success();
  }

private:
  static Region &previous(Module &m, const Region &r) {
    return r.kind == RegionKind::Layer ? m.pre : m.layer;
  }
  void retypeArgs(Module &m, Region &r) {
    Block &from = previous(m, r).fwd;
    for (size_t i = 0; i < r.fwd.args.size() && i < from.yields.size(); ++i) {
      r.fwd.args[i]->type = from.yields[i]->type;
      r.fwd.args[i]->typed = from.yields[i]->typed;
    }
  }

  static bool needsCopy(const Op &op) {
    return (op.kind == OpKind::Linear && op.enumAttr("shard", "none") == "column") ||
           (op.kind == OpKind::LMHead && op.enumAttr("shard", "vocab") == "vocab");
  }

  LogicalResult shardBlock(Module &m, Block &b, std::map<Value *, Value *> &replaced,
                           DiagnosticEngine &diag) {
    std::vector<std::unique_ptr<Op>> out;
    std::map<Value *, Value *> copies;
    for (auto &opPtr : b.ops) {
      Op &op = *opPtr;
      for (Value *&v : op.operands)
        if (auto it = replaced.find(v); it != replaced.end())
          v = it->second;
      if (needsCopy(op) && op.operands[0]->typed && !op.operands[0]->type.isSharded()) {
        Value *in = op.operands[0];
        Value *&copy = copies[in];
        if (!copy) {
          auto c = std::make_unique<Op>(OpKind::TpCopy, op.loc);
          c->operands = {in};
          auto v = std::make_unique<Value>();
          v->name = m.uniqueName(in->name + ".tp");
          v->def = c.get();
          c->results.push_back(std::move(v));
          if (failed(inferOpTypes(*c, m, diag)))
            return failure();
          copy = c->result();
          out.push_back(std::move(c));
        }
        op.operands[0] = copy;
      }
      if (op.kind == OpKind::CrossEntropy && op.operands[0]->typed &&
          op.operands[0]->type.isSharded())
        op.attrs["vocab_parallel"] = true;
      if (failed(inferOpTypes(op, m, diag)))
        return failure();
      out.push_back(std::move(opPtr));
      Value *res = op.results.empty() ? nullptr : op.result();
      if (res && res->type.partial) {
        auto ar = std::make_unique<Op>(OpKind::AllReduce, op.loc);
        ar->operands = {res};
        auto v = std::make_unique<Value>();
        v->name = res->name; // readers keep seeing the source name
        res->name = m.uniqueName(res->name + ".partial");
        v->def = ar.get();
        ar->results.push_back(std::move(v));
        if (failed(inferOpTypes(*ar, m, diag)))
          return failure();
        replaced[res] = ar->result();
        out.push_back(std::move(ar));
      }
    }
    b.ops = std::move(out);
    for (Value *&y : b.yields)
      if (auto it = replaced.find(y); it != replaced.end())
        y = it->second;
    return success();
  }
};

} // namespace

std::unique_ptr<Pass> mist::createTpShardPass() { return std::make_unique<TpShardPass>(); }
