//===- ShapeInfer.cpp - Symbolic tensor types -----------------------------===//
/// \file
/// Walks the forward blocks in order and applies each op's type rule
/// (ir/OpSemantics): result types, parameter shapes from their consumer,
/// and divisibility assumptions. Block arguments take the types of the
/// values flowing in (pre -> layer -> post); the repeated layer must map its
/// arguments to values of the same types. Already-typed values are checked
/// instead of overwritten, so the pass also validates parsed IR.
//===----------------------------------------------------------------------===//
#include "ir/OpSemantics.h"
#include "passes/LayerTypes.h"
#include "passes/Pass.h"

using namespace mist;

namespace {

class ShapeInferPass : public Pass {
public:
  llvm::StringRef argument() const override { return "shape-infer"; }
  bool alreadyApplied(const Module &) const override { return false; } // cheap re-check

  LogicalResult run(Module &m, DiagnosticEngine &diag) override {
    if (failed(flowInto(m.pre.fwd, m.layer.fwd, m, diag)) ||
        failed(inferBlock(m.layer.fwd, m, diag)))
      return failure();
    if (failed(checkLayerKeepsTypes(m, diag, "the repeated layer")))
      return failure();
    if (failed(flowInto(m.layer.fwd, m.post.fwd, m, diag)) ||
        failed(inferBlock(m.post.fwd, m, diag)))
      return failure();
    m.state.shaped = true;
    return success();
  }

private:
  LogicalResult inferBlock(Block &b, Module &m, DiagnosticEngine &diag) {
    for (auto &op : b.ops)
      if (failed(inferOpTypes(*op, m, diag)))
        return failure();
    return success();
  }

  /// Types `to`'s arguments from `from`'s yields (after typing `from`).
  LogicalResult flowInto(Block &from, Block &to, Module &m, DiagnosticEngine &diag) {
    if (&from == &m.pre.fwd && failed(inferBlock(from, m, diag)))
      return failure();
    if (from.yields.size() != to.args.size()) {
      diag.error({}, "region interface mismatch: " + std::to_string(from.yields.size()) +
                         " values flow into " + std::to_string(to.args.size()) + " arguments");
      return failure();
    }
    for (size_t i = 0; i < to.args.size(); ++i) {
      Value *y = from.yields[i], *a = to.args[i].get();
      llvm::SMLoc loc = y->def ? y->def->loc : llvm::SMLoc();
      if (!y->typed) {
        diag.error(loc, "value '%" + y->name + "' flowing into the next region has no type");
        return failure();
      }
      if (a->typed && !a->type.equals(y->type)) {
        diag.error(loc, "argument '%" + a->name + "' is declared " + a->type.str(m.symbols) +
                            " but receives " + y->type.str(m.symbols));
        return failure();
      }
      a->type = y->type;
      a->typed = true;
    }
    return success();
  }
};

} // namespace

std::unique_ptr<Pass> mist::createShapeInferPass() { return std::make_unique<ShapeInferPass>(); }
