//===- Lowering.h - The IR at one stage shape, with concrete sizes --------===//
/// \file
/// The first step of emitting a trainer (docs/trainer-design.md): the
/// differentiated, sharded IR evaluated at a stage's micro-batch `b` and
/// tensor-parallel degree `tp`. Every value becomes a buffer of known size,
/// every op a record with buffer indices and evaluated attributes, and every
/// parameter a layout: its full (tp = 1) shape and which parts of it each tp
/// rank holds. Fused q/k/v projections hold three slices (their q, k and v
/// heads), because the attention op reads `[q_r | k_r | v_r]` on rank r.
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/IR.h"
#include "support/Diagnostics.h"
#include "llvm/Support/raw_ostream.h"
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mist {

/// One tensor at the stage's shape (this tp rank's part).
struct LoweredBuffer {
  std::string name;
  DType dtype = DType::F32;
  Role role = Role::Act;
  std::vector<int64_t> shape;
  std::vector<Expr> dims; ///< the shape in the module's symbols (b, tp unbound)
  /// A partial sum over tp: of an activation, before its collective; of a
  /// parameter's gradient (a norm's under sequence parallelism), summed
  /// over tp by the runtime.
  bool partial = false;
  int64_t elements() const;
  Expr symbolicElements() const;
};

/// How a parameter is stored: its full shape and the parts a tp rank holds.
struct ParamLayout {
  std::string name;
  std::vector<int64_t> fullShape;
  int shardAxis = -1; ///< -1: every tp rank holds all of it
  /// Consecutive groups along the shard axis, each split evenly over tp (one
  /// group: a plain slice; three: a fused q/k/v projection).
  std::vector<int64_t> groups;
  /// [begin, end) along the shard axis of the full tensor that tp rank
  /// `rank` holds, in the order they appear in its local tensor.
  std::vector<std::pair<int64_t, int64_t>> rangesOf(int rank, int tp) const;
};

struct LoweredOp {
  OpKind kind;
  std::vector<int> operands, results;       ///< indices into LoweredStage::buffers
  std::map<std::string, double> numbers;    ///< size and real attributes, evaluated
  std::map<std::string, Expr> sizes;        ///< size attributes in the module's symbols
  std::map<std::string, std::string> words; ///< enum words; flags as "true"/"false"
};

struct LoweredRegion {
  RegionKind kind = RegionKind::Layer;
  std::vector<int> inputs, outputs;         ///< forward block arguments and yields
  std::vector<int> gradInputs, gradOutputs; ///< backward block arguments and yields
  std::vector<LoweredOp> forward, backward;
};

struct LoweredStage {
  int microBatch = 1, tp = 1;
  std::vector<LoweredBuffer> buffers;
  std::vector<ParamLayout> params; ///< one per parameter, by name
  std::vector<int> moduleInputs;   ///< tokens, targets
  LoweredRegion regions[3];        ///< pre, layer, post
  const LoweredRegion &region(RegionKind k) const { return regions[static_cast<int>(k)]; }
  const ParamLayout *param(const std::string &name) const;
};

/// How an attention op (or its gradient) reads its inputs on this rank: the
/// local head counts, and for a fused qkv the offsets of k and v within each
/// token's row. Emitters and executors share it so they agree; the emitter
/// reads it in the module's symbols (Size = Expr), executors as numbers.
template <class Size> struct AttentionGeometryOf {
  bool fused = false;
  Size batch = 0, seq = 0, heads = 0, kvHeads = 0, headDim = 0;
  Size qStride = 0, kvStride = 0; ///< floats between tokens of q / of k and v
  Size kOffset = 0, vOffset = 0;  ///< fused: where k and v start in a token's row
  size_t firstInput = 0;          ///< operand index of q (1 for the gradient: dy first)
  size_t outOperand = 0;          ///< gradient: the operand holding the forward output
};
using AttentionGeometry = AttentionGeometryOf<int64_t>;
AttentionGeometry attentionGeometry(const LoweredStage &st, const LoweredOp &op);
AttentionGeometryOf<Expr> symbolicAttentionGeometry(const LoweredStage &st, const LoweredOp &op);

/// Needs a module after shape-infer, tp-shard and backward; reports why not,
/// or which size does not evaluate to a positive integer, and returns nullopt.
std::optional<LoweredStage> lowerForStage(const Module &m, int microBatch, int tp,
                                          DiagnosticEngine &diag);

/// A readable listing (`--emit=lowered`).
void printLowered(const LoweredStage &stage, llvm::raw_ostream &os);

} // namespace mist
