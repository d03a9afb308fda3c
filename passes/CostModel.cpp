//===- CostModel.cpp - Symbolic per-op and per-region costs ---------------===//
#include "passes/CostModel.h"

#include "ir/OpSemantics.h"
#include "passes/Pass.h"
#include <set>

using namespace mist;

namespace {

Expr bytesOf(const Value *v) { return v->type.bytes(); }

Expr lastDim(const TensorType &t) { return t.shape.empty() ? Expr(1) : t.shape.back(); }

/// Rows of a matmul input: all axes but the last.
Expr rows(const TensorType &t) { return t.numElements() / lastDim(t); }

Expr matmulFlops(const TensorType &x, const TensorType &y) {
  return 2 * rows(x) * lastDim(x) * lastDim(y);
}

/// QK^T and AV of every head: 4 * b * s^2 * (heads * head_dim), where the
/// output's last axis is heads * head_dim (per rank).
Expr attentionFlops(const TensorType &q, const TensorType &out) {
  if (q.rank() != 3)
    return 0; // malformed IR; the verifier and type rules report it
  return 4 * q.shape[0] * GiNaC::pow(q.shape[1], 2) * lastDim(out);
}

bool savesAsActivation(const Value *v) { return v->type.role != Role::Param; }

/// Adds what an unfused cross entropy moves beyond its operands and results,
/// in units of its fp32 softmax (the forward's `.probs`, the backward's last
/// operand), in Megatron-LM's vocab-parallel sequence of PyTorch ops
/// (megatron/core/tensor_parallel/cross_entropy.py). Forward: the upcast
/// (the op's own operand read and result written), then the row max (read),
/// the in-place subtraction and exponential (read and write each), the row
/// sum (read) and the in-place division (read and write): five reads and
/// three writes more. Backward: the in-place scaling by the loss gradient
/// (the softmax read as the op's operand, and written), then the cast back
/// to the logits' type (read, and the gradient written as the op's result):
/// one read and one write more.
void addUnfusedLossPasses(const Op &op, OpCost &c) {
  const bool forward = op.kind == OpKind::CrossEntropy;
  const Value *probs =
      forward ? (op.results.size() > 2 ? op.results[2].get() : nullptr) : op.operands.back();
  if (!probs || probs->type.dtype != DType::F32)
    return; // malformed IR; the verifier and type rules report it
  Expr bytes = probs->type.bytes();
  c.read += (forward ? 5 : 1) * bytes;
  c.write += (forward ? 3 : 1) * bytes;
}

} // namespace

OpCost mist::computeOpCost(const Op &op) {
  OpCost c;
  if (op.kind == OpKind::Param)
    return c;
  for (const Value *v : op.operands)
    c.read += bytesOf(v);
  for (auto &r : op.results)
    c.write += bytesOf(r.get());
  switch (op.kind) {
  case OpKind::Linear:
  case OpKind::LMHead:
    c.flops = matmulFlops(op.operands[0]->type, op.result()->type);
    break;
  case OpKind::Attention:
    c.flops = attentionFlops(op.operands[0]->type, op.result()->type);
    break;
  case OpKind::LinearGrad:
  case OpKind::LMHeadGrad:
    // dX = dY W^T and dW = X^T dY: twice the forward matmul.
    c.flops = 2 * matmulFlops(op.operands[1]->type, op.operands[0]->type);
    break;
  case OpKind::AttentionGrad: {
    // Non-flash: dV, dP, dQ, dK (4 matmuls vs 2 forward). Flash also
    // recomputes QK^T: 5 matmuls.
    Expr fwd = attentionFlops(op.operands[1]->type, op.operands[0]->type);
    c.flops = op.boolAttr("flash", true) ? fwd * 5 / 2 : fwd * 2;
    break;
  }
  case OpKind::AllReduce:
  case OpKind::ReduceScatter: // the whole partial sum
    c.comm = bytesOf(op.operands[0]);
    break;
  case OpKind::AllGather: // the whole gathered tensor
    c.comm = bytesOf(op.results[0].get());
    break;
  case OpKind::CrossEntropy:
  case OpKind::CrossEntropyGrad:
    // Vocab-parallel: all-reduce of the row max, the sum of exponentials and
    // the target logit (fp32 per token) in forward; backward is local.
    if (op.kind == OpKind::CrossEntropy && op.boolAttr("vocab_parallel", false))
      c.comm = 3 * 4 * op.operands[1]->type.numElements();
    if (!op.boolAttr("fused", true))
      addUnfusedLossPasses(op, c);
    break;
  default:
    break;
  }
  if (!isGradOp(op.kind) && op.kind != OpKind::AllReduce) {
    SavedSet s = savedForBackward(op);
    for (unsigned i : s.operands)
      if (savesAsActivation(op.operands[i]))
        c.saved += bytesOf(op.operands[i]);
    for (unsigned i : s.results)
      c.saved += bytesOf(op.results[i].get());
  }
  return c;
}

RegionSummary mist::summarizeRegion(const Region &r) {
  Expr params = 0, fwdFlops = 0, bwdFlops = 0, fwdComm = 0, bwdComm = 0, saved = 0;
  std::set<const Value *> kept;
  for (auto &op : r.fwd.ops) {
    if (op->kind == OpKind::Param)
      params += op->result()->type.numElements();
    OpCost c = op->cost ? *op->cost : computeOpCost(*op);
    fwdFlops += c.flops;
    fwdComm += c.comm;
    SavedSet s = savedForBackward(*op);
    for (unsigned i : s.operands)
      if (savesAsActivation(op->operands[i]))
        kept.insert(op->operands[i]);
    for (unsigned i : s.results)
      kept.insert(op->results[i].get());
  }
  for (const Value *v : kept)
    saved += bytesOf(v);
  if (r.bwd)
    for (auto &op : r.bwd->ops) {
      OpCost c = op->cost ? *op->cost : computeOpCost(*op);
      bwdFlops += c.flops;
      bwdComm += c.comm;
    }
  RegionSummary s;
  s.entries = {{"params", params}, {"fwd_flops", fwdFlops}, {"bwd_flops", bwdFlops},
               {"saved", saved},   {"fwd_comm", fwdComm},   {"bwd_comm", bwdComm}};
  return s;
}

namespace {

class CostModelPass : public Pass {
public:
  llvm::StringRef argument() const override { return "cost-model"; }
  bool alreadyApplied(const Module &m) const override { return m.state.costed; }

  LogicalResult run(Module &m, DiagnosticEngine &diag) override {
    if (!m.state.shaped) {
      diag.error({}, "cost-model needs shape-infer to run first");
      return failure();
    }
    for (Region *r : m.regions) {
      for (auto &op : r->fwd.ops)
        op->cost = computeOpCost(*op);
      if (r->bwd)
        for (auto &op : r->bwd->ops)
          op->cost = computeOpCost(*op);
      r->summary = summarizeRegion(*r);
    }
    m.state.costed = true;
    return success();
  }
};

} // namespace

std::unique_ptr<Pass> mist::createCostModelPass() { return std::make_unique<CostModelPass>(); }
