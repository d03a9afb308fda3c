//===- SequenceParallel.cpp - Megatron-LM's sequence parallelism ----------===//
/// \file
/// Precondition: shaped and tp-sharded, not yet differentiated. Splits
/// every activation tp replicates along the tokens, as Megatron-LM's
/// `--sequence-parallel` does (Korthikanti et al., 2022): the tokens of a
/// micro-batch, flattened to one axis ([b, s, c] -> [b*s, c]), are cut into
/// tp contiguous parts, one per tp rank, so both collectives move
/// contiguous memory and nothing is transposed.
///   - an `all_reduce` of a partial sum becomes a `reduce_scatter`: each
///     rank keeps its part of the sum;
///   - a `tp_copy` in front of a column-parallel op becomes an
///     `all_gather` of the split input;
///   - the ops between (norms, residual adds, dropout, element-wise ops,
///     slices and concatenations of channels) run on the split tokens, as does
///     `position_embedding`, which takes the positions of this rank's tokens (`sequence_split`);
///   - the region boundaries (the layers' input and output) are split.
/// Any other op reading a split value is refused with its location: the
/// models of the language only put norms and element-wise ops there.
/// The backward pass then derives the gradients (reduce-scatter and
/// all-gather swap, gathered inputs are gathered again, norm and position
/// parameters get partial gradients). Not in the default pipeline: the
/// trainer applies it for a plan with `sequence_parallel`
/// (passes/Pipeline.h, applySequenceParallel); the performance model
/// prices the same collectives from the plain module (docs/perf-model.md).
//===----------------------------------------------------------------------===//
#include "ir/OpSemantics.h"
#include "passes/LayerTypes.h"
#include "passes/Pass.h"
#include <set>

using namespace mist;

namespace {

/// Ops that work token by token: they may run on a split of the tokens
/// (slice and concat cut and join the channels of each token).
bool worksPerToken(OpKind k) {
  switch (k) {
  case OpKind::Slice:
  case OpKind::Concat:
  case OpKind::LayerNorm:
  case OpKind::RMSNorm:
  case OpKind::Add:
  case OpKind::Dropout:
  case OpKind::Gelu:
  case OpKind::Silu:
  case OpKind::Mul:
    return true;
  default:
    return false;
  }
}

class SequenceParallelPass : public Pass {
public:
  llvm::StringRef argument() const override { return "sequence-parallel"; }
  bool alreadyApplied(const Module &m) const override { return m.state.sequenceSplit; }

  LogicalResult run(Module &m, DiagnosticEngine &diag) override {
    if (!m.state.shaped || !m.state.tpSharded || m.state.differentiated) {
      diag.error({}, "sequence-parallel runs after shape-infer and tp-shard and before backward");
      return failure();
    }
    if (m.state.sequenceSplit)
      return success();
    m.state.sequenceSplit = true;
    m.dropCosts(); // the collectives and shapes change
    for (Region *r : m.regions) {
      if (r->kind != RegionKind::Pre)
        retypeArgs(m, *r);
      if (failed(splitBlock(m, *r, diag)))
        return failure();
      // Checked before the next region is retyped, so an error points here.
      if (r->kind == RegionKind::Pre && failed(checkLayerInputSplit(m, diag)))
        return failure();
      if (r->kind == RegionKind::Layer &&
          failed(checkLayerKeepsTypes(m, diag, "under sequence parallelism the repeated layer")))
        return failure();
    }
    return success();
  }

private:
  /// A region's arguments take the (split) types of the values flowing in.
  static void retypeArgs(Module &m, Region &r) {
    const Block &from = (r.kind == RegionKind::Layer ? m.pre : m.layer).fwd;
    for (size_t i = 0; i < r.fwd.args.size() && i < from.yields.size(); ++i)
      r.fwd.args[i]->type = from.yields[i]->type;
  }

  static bool readsSplit(const Op &op) {
    for (const Value *v : op.operands)
      if (v->typed && v->type.isTokenSplit())
        return true;
    return false;
  }

  /// Types `op` again under its rule (its operands changed).
  static LogicalResult retype(Op &op, Module &m, DiagnosticEngine &diag) {
    for (auto &res : op.results)
      res->typed = false;
    return inferOpTypes(op, m, diag);
  }

  LogicalResult splitBlock(Module &m, Region &r, DiagnosticEngine &diag) {
    for (auto &opPtr : r.fwd.ops) {
      Op &op = *opPtr;
      const bool split = readsSplit(op);
      if (op.kind == OpKind::AllReduce && op.operands[0]->type.partial) {
        op.kind = OpKind::ReduceScatter;
      } else if (op.kind == OpKind::TpCopy && split) {
        op.kind = OpKind::AllGather;
      } else if (op.kind == OpKind::PositionEmbedding) {
        op.attrs["sequence_split"] = true;
      } else if (split && worksPerToken(op.kind)) {
        for (const Value *v : op.operands)
          if (v->type.role == Role::Act && !v->type.isTokenSplit())
            return refuse(op, m, v, diag, " beside a value split along the tokens");
      } else if (split) {
        for (const Value *v : op.operands)
          if (v->type.isTokenSplit())
            return refuse(op, m, v, diag, "");
      } else {
        continue; // untouched: its operands are as they were
      }
      if (failed(retype(op, m, diag)))
        return failure();
    }
    return success();
  }

  static LogicalResult refuse(const Op &op, const Module &m, const Value *v, DiagnosticEngine &diag,
                              const std::string &why) {
    diag.error(op.loc, "sequence parallelism: " + opName(op.kind).str() + " reads '%" + v->name +
                           "' (" + v->type.str(m.symbols) + ")" + why +
                           "; under sequence parallelism only norms, residual adds, "
                           "element-wise ops and slices or concatenations of channels run on a "
                           "split of the tokens, a column-parallel op reads them all-gathered "
                           "(Megatron-LM's rule)");
    return failure();
  }

  /// The layers carry split activations: the pre region must yield them split.
  static LogicalResult checkLayerInputSplit(Module &m, DiagnosticEngine &diag) {
    for (const Value *y : m.pre.fwd.yields)
      if (y->type.role == Role::Act && !y->type.isTokenSplit()) {
        diag.error(y->def ? y->def->loc : llvm::SMLoc(),
                   "sequence parallelism: the layers' input '%" + y->name +
                       "' is not split along the tokens (" + y->type.str(m.symbols) +
                       "); it splits where the embedding's partial sums are reduced, so the "
                       "token embedding must be vocabulary-parallel");
        return failure();
      }
    return success();
  }
};

} // namespace

std::unique_ptr<Pass> mist::createSequenceParallelPass() {
  return std::make_unique<SequenceParallelPass>();
}
