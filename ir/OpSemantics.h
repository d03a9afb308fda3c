//===- OpSemantics.h - Per-op type rules and saved-for-backward sets ------===//
/// \file
/// The type rule of each forward op (result types from operand types and
/// attributes, parameter shapes from their consumer, tensor-parallel sharding
/// once the module is tp-sharded) and the set of values each forward op keeps
/// for its backward. Shape inference, the backward pass, the cost model and
/// the verifier all read these tables; nothing else re-derives them.
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/IR.h"
#include "support/Diagnostics.h"
#include "support/LogicalResult.h"

namespace mist {

/// Infers the result types of a forward op (and the types of untyped `param`
/// operands). Typed results are checked against the rule instead.
LogicalResult inferOpTypes(Op &op, Module &m, DiagnosticEngine &diag);

/// Values a forward op keeps alive for its backward op, in operand order of
/// the backward op (after the incoming gradient).
struct SavedSet {
  std::vector<unsigned> operands; ///< indices into op.operands
  std::vector<unsigned> results;  ///< indices into op.results
};
SavedSet savedForBackward(const Op &op);

/// Whether `op`'s result is its first operand unchanged, so the result can
/// share that operand's memory and the op need not run: tp_copy (identity
/// forward), dropout and its gradient at p = 0, and all_reduce (and
/// sequence parallelism's all_gather and reduce_scatter) when the tp group
/// is one rank (`singleTpRank`). The trainer's lowering and the
/// memory and time models apply the same rule (docs/perf-model.md).
bool forwardsOperand(const Op &op, bool singleTpRank);

/// Whether selective recomputation (plan key `selective_recompute`) drops an
/// op's first result after the forward and computes it again before the
/// backward: norms and activation functions, whose inputs the backward keeps
/// anyway and whose cost is one pass over memory; the GEMMs' and
/// attention's outputs stay saved (TorchTitan's op-level selective
/// activation checkpointing; Megatron-LM's --recompute-modules layernorm
/// covers the norms).
bool recomputedSelectively(OpKind kind);

/// Whether the trainer runs two ops that follow each other, the second
/// reading the first's result 0, as one (backend/trainer/FusedOps.h): a
/// linear layer that is not row-parallel and the tanh GELU of its output;
/// a linear layer's gradient and the tanh GELU gradient of its input's
/// gradient, when nothing else reads that gradient (`firstResultReadOnce`);
/// a residual add and the norm of its sum. The performance model counts
/// what such a pair touches as live together, as the trainer holds it.
bool fusesWithNext(OpKind first, OpKind second, bool firstRowParallel, bool secondTanhGelu,
                   bool firstResultReadOnce);

/// Results of `op` whose gradient flows backward (result 0 for every
/// forward op; extra results are statistics and masks).
inline bool isDifferentiableResult(unsigned index) { return index == 0; }

/// Whether a gelu or gelu_grad op is the exact GELU, x Phi(x): its
/// `approximate` attribute is false (absent or true: the tanh approximation).
inline bool geluIsExact(const Op &op) { return !op.boolAttr("approximate", true); }

/// The tp symbol of the module (declared on demand).
Expr tpSymbol(Module &m);

} // namespace mist

namespace mist {
/// Name suffixes of a forward op's results after the first (".stats",
/// ".lse", ...); their count is the op's result count minus one.
std::vector<const char *> extraResultSuffixes(OpKind kind, const AttrMap &attrs);
} // namespace mist
