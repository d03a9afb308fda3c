//===- OpSemantics.cpp - Per-op type rules and saved sets -----------------===//
#include "ir/OpSemantics.h"

using namespace mist;

Expr mist::tpSymbol(Module &m) {
  if (const Symbol *s = m.symbols.ofKind(SymbolKind::TP))
    return s->sym;
  // `tp`, or the first of tp_, tp__, ... that no model parameter took.
  std::string name = "tp";
  while (m.symbols.lookup(name))
    name += '_';
  return m.symbols.declare(name, SymbolKind::TP, std::nullopt)->sym;
}

namespace {

/// Shared state of one rule application.
class RuleContext {
public:
  RuleContext(Op &op, Module &m, DiagnosticEngine &diag)
      : op(op), m(m), diag(diag), sharded(m.state.tpSharded), tp(tpSymbol(m)) {}

  Op &op;
  Module &m;
  DiagnosticEngine &diag;
  bool sharded;
  Expr tp;

  LogicalResult error(const llvm::Twine &msg) {
    diag.error(op.loc, msg);
    return failure();
  }
  std::string str(const Expr &e) { return printExpr(e, m.symbols); }
  std::string str(const TensorType &t) { return t.str(m.symbols); }

  LogicalResult expectOperands(size_t lo, size_t hi) {
    if (op.operands.size() < lo || op.operands.size() > hi)
      return error(llvm::Twine(opName(op.kind)) + " expects " + std::to_string(lo) +
                   (lo == hi ? "" : " to " + std::to_string(hi)) + " operands, got " +
                   std::to_string(op.operands.size()));
    for (Value *v : op.operands)
      if (!v->typed && !(v->def && v->def->kind == OpKind::Param))
        return error("operand '%" + v->name + "' has no type yet");
    return success();
  }
  LogicalResult expectResults(size_t n) {
    if (op.results.size() != n)
      return error(llvm::Twine(opName(op.kind)) + " has " + std::to_string(n) +
                   (n == 1 ? " result, got " : " results, got ") +
                   std::to_string(op.results.size()));
    return success();
  }
  /// An activation operand: typed, floating point, not a pending partial sum.
  LogicalResult expectActivation(unsigned i, unsigned rank = 0) {
    Value *v = op.operands[i];
    if (v->type.role == Role::Param)
      return error("operand '%" + v->name + "' of " + opName(op.kind).str() +
                   " must be an activation, not a parameter");
    if (v->type.partial)
      return error("operand '%" + v->name + "' is a partial sum; it must be all-reduced first");
    if (rank && v->type.rank() != rank)
      return error(opName(op.kind).str() + " expects a rank-" + std::to_string(rank) +
                   " input, got " + str(v->type));
    if (v->type.rank() == 0)
      return error(opName(op.kind).str() + " expects a tensor with at least one axis");
    return success();
  }
  /// Full (unsharded) size of the last axis.
  Expr fullLast(const TensorType &t) {
    Expr last = t.shape.back();
    return t.shardAxis == static_cast<int>(t.rank()) - 1 ? last * tp : last;
  }
  bool lastSharded(const TensorType &t) {
    return t.shardAxis >= 0 && t.shardAxis == static_cast<int>(t.rank()) - 1;
  }
  /// Sets or checks the type of a result.
  LogicalResult setResult(unsigned i, TensorType t) {
    Value *v = op.results[i].get();
    if (v->typed && !v->type.equals(t))
      return error("result '%" + v->name + "' is declared " + str(v->type) + " but " +
                   opName(op.kind).str() + " produces " + str(t));
    v->type = std::move(t);
    v->typed = true;
    return success();
  }
  /// Sets or checks the type of a parameter operand.
  LogicalResult setParam(unsigned i, std::vector<Expr> shape, int shardAxis) {
    Value *v = op.operands[i];
    if (!v->def || v->def->kind != OpKind::Param)
      if (v->type.role != Role::Param)
        return error("operand '%" + v->name + "' of " + opName(op.kind).str() +
                     " must be a parameter");
    TensorType t;
    t.dtype = m.train.dtype;
    t.role = Role::Param;
    t.shape = std::move(shape);
    t.shardAxis = shardAxis;
    if (v->typed && !v->type.equals(t))
      return error("parameter '%" + v->name + "' is " + str(v->type) + " but " +
                   opName(op.kind).str() + " needs " + str(t));
    v->type = std::move(t);
    v->typed = true;
    return success();
  }
  /// Divides `full` by tp, recording the divisibility assumption.
  Expr splitTp(const Expr &full) {
    m.assume(full, tp);
    return full / tp;
  }
  std::optional<Expr> dim(const char *name) {
    auto d = op.dimAttr(name);
    if (!d)
      (void)error(opName(op.kind).str() + " needs the size attribute '" + name + "'");
    return d;
  }
  TensorType act(DType dt, std::vector<Expr> shape, int shardAxis = -1, bool partial = false) {
    TensorType t;
    t.dtype = dt;
    t.shape = std::move(shape);
    t.shardAxis = shardAxis;
    t.partial = partial;
    return t;
  }
  std::string shardMode(std::initializer_list<llvm::StringRef> allowed, bool &ok) {
    std::string mode = op.enumAttr("shard", "none");
    ok = false;
    for (llvm::StringRef a : allowed)
      ok |= mode == a;
    if (!ok)
      (void)error("shard = " + mode + " is not valid for " + opName(op.kind).str());
    return mode;
  }
};

std::vector<Expr> withLast(std::vector<Expr> shape, Expr last) {
  shape.back() = std::move(last);
  return shape;
}

LogicalResult inferParam(RuleContext &c) {
  if (failed(c.expectOperands(0, 0)) || failed(c.expectResults(1)))
    return failure();
  return success(); // typed by its consumer
}

LogicalResult inferEmbedding(RuleContext &c) {
  if (failed(c.expectOperands(2, 2)) || failed(c.expectResults(1)))
    return failure();
  auto rows = c.dim("rows"), width = c.dim("dim");
  if (!rows || !width)
    return failure();
  bool ok;
  std::string mode = c.shardMode({"none", "vocab"}, ok);
  if (!ok)
    return failure();
  const TensorType &ids = c.op.operands[0]->type;
  if (ids.dtype != DType::I32 || ids.rank() != 2)
    return c.error("embedding expects i32 token ids of rank 2, got " + c.str(ids));
  bool split = c.sharded && mode == "vocab";
  if (failed(c.setParam(1, {split ? c.splitTp(*rows) : *rows, *width}, split ? 0 : -1)))
    return failure();
  return c.setResult(0, c.act(c.m.train.dtype, {ids.shape[0], ids.shape[1], *width}, -1, split));
}

LogicalResult inferPositionEmbedding(RuleContext &c) {
  if (failed(c.expectOperands(1, 1)) || failed(c.expectResults(1)))
    return failure();
  auto len = c.dim("len"), width = c.dim("dim");
  if (!len || !width)
    return failure();
  if (failed(c.setParam(0, {*len, *width}, -1)))
    return failure();
  const Symbol *b = c.m.symbols.ofKind(SymbolKind::Batch);
  Expr batch = b ? Expr(b->sym) : Expr(1);
  // Under sequence parallelism: this tp rank's part of the flattened tokens.
  if (c.op.boolAttr("sequence_split", false)) {
    c.m.assume(*len, c.tp);
    return c.setResult(0, c.act(c.m.train.dtype, {batch * *len / c.tp, *width}, 0));
  }
  return c.setResult(0, c.act(c.m.train.dtype, {batch, *len, *width}));
}

LogicalResult inferNorm(RuleContext &c, unsigned numStats) {
  if (failed(c.expectOperands(2, 3)) || failed(c.expectResults(2)) || failed(c.expectActivation(0)))
    return failure();
  const TensorType &x = c.op.operands[0]->type;
  if (c.lastSharded(x))
    return c.error(opName(c.op.kind).str() +
                   " normalizes the last axis, which is sharded over tp in " + c.str(x));
  bool wantBias = c.op.kind == OpKind::LayerNorm && c.op.boolAttr("bias", true);
  if (c.op.operands.size() != (wantBias ? 3u : 2u))
    return c.error(opName(c.op.kind).str() + (wantBias ? " with a bias" : " without a bias") +
                   " expects " + std::to_string(wantBias ? 3 : 2) + " operands");
  for (unsigned i = 1; i < c.op.operands.size(); ++i)
    if (failed(c.setParam(i, {x.shape.back()}, -1)))
      return failure();
  TensorType y = x;
  y.role = Role::Act;
  if (failed(c.setResult(0, y)))
    return failure();
  return c.setResult(1, c.act(DType::F32, withLast(x.shape, numStats), x.shardAxis));
}

LogicalResult inferLinear(RuleContext &c) {
  if (failed(c.expectOperands(2, 3)) || failed(c.expectResults(1)) || failed(c.expectActivation(0)))
    return failure();
  auto out = c.dim("out");
  if (!out)
    return failure();
  bool ok;
  std::string mode = c.shardMode({"none", "column", "row"}, ok);
  if (!ok)
    return failure();
  bool wantBias = c.op.boolAttr("bias", true);
  if (c.op.operands.size() != (wantBias ? 3u : 2u))
    return c.error(std::string("linear ") + (wantBias ? "with" : "without") + " a bias expects " +
                   std::to_string(wantBias ? 3 : 2) + " operands");
  const TensorType &x = c.op.operands[0]->type;
  Expr in = c.fullLast(x);
  int last = static_cast<int>(x.rank()) - 1;
  if (!c.sharded || mode == "none") {
    if (c.lastSharded(x))
      return c.error("linear without row sharding needs a replicated input, got " + c.str(x));
    if (failed(c.setParam(1, {in, *out}, -1)) || (wantBias && failed(c.setParam(2, {*out}, -1))))
      return failure();
    return c.setResult(0, c.act(x.dtype, withLast(x.shape, *out), x.shardAxis));
  }
  if (mode == "column") {
    if (c.lastSharded(x))
      return c.error("column-parallel linear needs a replicated input, got " + c.str(x));
    Expr part = c.splitTp(*out);
    if (failed(c.setParam(1, {in, part}, 1)) || (wantBias && failed(c.setParam(2, {part}, 0))))
      return failure();
    return c.setResult(0, c.act(x.dtype, withLast(x.shape, part), last));
  }
  // Row parallel: the input is split along its last axis; the output is a
  // partial sum that an all_reduce completes. The bias is added after it.
  if (!c.lastSharded(x))
    return c.error("row-parallel linear needs an input sharded along its last axis, got " +
                   c.str(x));
  if (failed(c.setParam(1, {c.splitTp(in), *out}, 0)) ||
      (wantBias && failed(c.setParam(2, {*out}, -1))))
    return failure();
  return c.setResult(0, c.act(x.dtype, withLast(x.shape, *out), -1, /*partial=*/true));
}

LogicalResult inferLMHead(RuleContext &c) {
  if (failed(c.expectOperands(2, 2)) || failed(c.expectResults(1)) || failed(c.expectActivation(0)))
    return failure();
  auto vocab = c.dim("vocab");
  if (!vocab)
    return failure();
  bool ok;
  std::string mode = c.shardMode({"none", "vocab"}, ok);
  if (!ok)
    return failure();
  const TensorType &x = c.op.operands[0]->type;
  if (c.lastSharded(x))
    return c.error("lm_head needs a replicated input, got " + c.str(x));
  bool split = c.sharded && mode == "vocab";
  // The weight is [vocab, hidden] so it can be the embedding table (tied).
  if (failed(c.setParam(1, {split ? c.splitTp(*vocab) : *vocab, x.shape.back()}, split ? 0 : -1)))
    return failure();
  int last = static_cast<int>(x.rank()) - 1;
  return c.setResult(
      0, c.act(x.dtype, withLast(x.shape, split ? *vocab / c.tp : *vocab), split ? last : -1));
}

LogicalResult inferAttention(RuleContext &c) {
  if (failed(c.expectOperands(1, 3)) || c.op.operands.size() == 2)
    return c.error("attention takes a fused qkv tensor or separate q, k, v tensors");
  auto heads = c.dim("heads"), kvHeads = c.dim("kv_heads"), headDim = c.dim("head_dim");
  if (!heads || !kvHeads || !headDim)
    return failure();
  for (unsigned i = 0; i < c.op.operands.size(); ++i)
    if (failed(c.expectActivation(i, 3)))
      return failure();
  const TensorType &q = c.op.operands[0]->type;
  bool split = c.lastSharded(q);
  for (Value *v : c.op.operands)
    if (c.lastSharded(v->type) != split)
      return c.error("attention inputs must all be sharded over heads or all be replicated");
  Expr h = *heads, kv = *kvHeads;
  if (split) {
    h = c.splitTp(*heads);
    kv = c.splitTp(*kvHeads);
  }
  auto check = [&](unsigned i, const Expr &want, const char *what) -> LogicalResult {
    const TensorType &t = c.op.operands[i]->type;
    if (!exprEqual(t.shape.back(), want))
      return c.error(std::string("attention ") + what + " has last axis " + c.str(t.shape.back()) +
                     " but heads and head_dim need " + c.str(want));
    if (!exprEqual(t.shape[0], q.shape[0]) || !exprEqual(t.shape[1], q.shape[1]))
      return c.error("attention inputs disagree on batch or sequence axes");
    return success();
  };
  if (c.op.operands.size() == 1) {
    if (failed(check(0, (h + 2 * kv) * *headDim, "fused qkv input")))
      return failure();
  } else if (failed(check(0, h * *headDim, "query")) || failed(check(1, kv * *headDim, "key")) ||
             failed(check(2, kv * *headDim, "value"))) {
    return failure();
  }
  // Query heads share key/value heads in equal groups. The module records
  // the fact as an assumption; with the sizes bound it can be checked now.
  Expr groups = c.m.symbols.bindAll(*heads / *kvHeads);
  if (GiNaC::is_a<GiNaC::numeric>(groups) && !GiNaC::ex_to<GiNaC::numeric>(groups).is_integer())
    return c.error("attention needs heads to be a multiple of kv_heads, but " +
                   c.str(c.m.symbols.bindAll(*heads)) + " is not a multiple of " +
                   c.str(c.m.symbols.bindAll(*kvHeads)));
  c.m.assume(*heads, *kvHeads);
  Expr batch = q.shape[0], seq = q.shape[1];
  int axis = split ? 2 : -1;
  bool flash = c.op.boolAttr("flash", true);
  double dropout = c.op.realAttr("dropout").value_or(0.0);
  if (dropout < 0 || dropout >= 1)
    return c.error("attention dropout must be in [0, 1)");
  size_t want = flash ? 2 : (dropout > 0 ? 4 : 2);
  if (failed(c.expectResults(want)) ||
      failed(c.setResult(0, c.act(q.dtype, {batch, seq, h * *headDim}, axis))))
    return failure();
  if (flash) // log-sum-exp per query row, fp32
    return c.setResult(1, c.act(DType::F32, {batch, h, seq}, split ? 1 : -1));
  int headAxis = split ? 1 : -1;
  if (failed(c.setResult(1, c.act(q.dtype, {batch, h, seq, seq}, headAxis))))
    return failure(); // softmax probabilities
  if (dropout > 0 && (failed(c.setResult(2, c.act(DType::U8, {batch, h, seq, seq}, headAxis))) ||
                      failed(c.setResult(3, c.act(q.dtype, {batch, h, seq, seq}, headAxis)))))
    return failure();
  return success();
}

LogicalResult inferRope(RuleContext &c) {
  if (failed(c.expectOperands(1, 1)) || failed(c.expectResults(1)) ||
      failed(c.expectActivation(0, 3)))
    return failure();
  auto heads = c.dim("heads"), headDim = c.dim("head_dim");
  if (!heads || !headDim)
    return failure();
  const TensorType &x = c.op.operands[0]->type;
  Expr h = c.lastSharded(x) ? c.splitTp(*heads) : *heads;
  if (!exprEqual(x.shape.back(), h * *headDim))
    return c.error("rope input has last axis " + c.str(x.shape.back()) +
                   " but heads and head_dim need " + c.str(h * *headDim));
  // The rotated dims (all of the head's unless partial: rotary_dim) come in
  // pairs: an even number of leading dims, at most the head's.
  auto d = exprToInt(c.m.symbols.bindAll(*headDim));
  if (auto rotary = c.op.dimAttr("rotary_dim")) {
    auto r = exprToInt(c.m.symbols.bindAll(*rotary));
    if (r && (*r <= 0 || *r % 2 != 0 || (d && *r > *d)))
      return c.error("rope's rotary_dim must be an even number from 2 to head_dim (" +
                     (d ? std::to_string(*d) : c.str(*headDim)) + "), not " + std::to_string(*r));
  } else if (d && *d % 2 != 0) {
    return c.error("rope rotates pairs of dims: head_dim must be even, not " + std::to_string(*d) +
                   " (or rotate an even part of it with rotary_dim)");
  }
  return c.setResult(0, x);
}

/// slice(x, start, size): columns [start, start + size) of the last axis.
/// On an axis split over tp, each rank takes its part of the slice: the
/// column-parallel linear that computes x lays its parameters out per slice
/// (backend/trainer/Lowering.cpp, parameter groups), so the slice must read it
/// directly, and start and size must divide by tp.
LogicalResult inferSlice(RuleContext &c) {
  if (failed(c.expectOperands(1, 1)) || failed(c.expectResults(1)) || failed(c.expectActivation(0)))
    return failure();
  auto start = c.dim("start"), size = c.dim("size");
  if (!start || !size)
    return failure();
  const TensorType &x = c.op.operands[0]->type;
  const Expr width = c.fullLast(x);
  auto value = [&](const Expr &e) { return exprToInt(c.m.symbols.bindAll(e)); };
  auto s = value(*start), n = value(*size), w = value(width);
  if (!s || !n)
    return c.error("slice's start and size must be sizes of the model (" + c.str(*start) + ", " +
                   c.str(*size) + " are not)");
  if (s && *s < 0)
    return c.error("slice's start must not be negative, got " + std::to_string(*s));
  if (n && *n <= 0)
    return c.error("slice's size must be positive, got " + std::to_string(*n));
  if (s && n && w && *s + *n > *w)
    return c.error("slice [" + std::to_string(*s) + ", " + std::to_string(*s + *n) +
                   ") runs past the last axis of '%" + c.op.operands[0]->name + "' (" +
                   std::to_string(*w) + " wide)");
  if (!c.lastSharded(x))
    return c.setResult(0, c.act(x.dtype, withLast(x.shape, *size), x.shardAxis));
  const Op *producer = c.op.operands[0]->def;
  if (!producer || producer->kind != OpKind::Linear ||
      producer->enumAttr("shard", "none") != "column")
    return c.error("slice of an axis split over tp must read the column-parallel linear that "
                   "computes it (its parameters are laid out slice by slice)");
  c.splitTp(*start);
  return c.setResult(0, c.act(x.dtype, withLast(x.shape, c.splitTp(*size)), x.shardAxis));
}

/// concat(a, b): a's columns then b's along the last axis; the other axes
/// and the dtype agree. Not along an axis split over tp (whose consumers
/// would need the parameters laid out part by part).
LogicalResult inferConcat(RuleContext &c) {
  if (failed(c.expectOperands(2, 2)) || failed(c.expectResults(1)) ||
      failed(c.expectActivation(0)) || failed(c.expectActivation(1)))
    return failure();
  const TensorType &a = c.op.operands[0]->type, &b = c.op.operands[1]->type;
  if (c.lastSharded(a) || c.lastSharded(b))
    return c.error("concat along an axis split over tp is not supported: concatenate before "
                   "the column-parallel linear or after the row-parallel one");
  bool same = a.rank() == b.rank() && a.dtype == b.dtype && a.shardAxis == b.shardAxis;
  for (size_t i = 0; same && i + 1 < a.rank(); ++i)
    same = exprEqual(a.shape[i], b.shape[i]);
  if (!same)
    return c.error("concat needs tensors that differ only in their last axis, got " + c.str(a) +
                   " and " + c.str(b));
  return c.setResult(
      0, c.act(a.dtype, withLast(a.shape, a.shape.back() + b.shape.back()), a.shardAxis));
}

LogicalResult inferUnary(RuleContext &c) {
  if (failed(c.expectOperands(1, 1)) || failed(c.expectActivation(0)))
    return failure();
  TensorType x = c.op.operands[0]->type;
  if (c.op.kind == OpKind::Dropout) {
    double p = c.op.realAttr("p").value_or(-1);
    if (p < 0 || p >= 1)
      return c.error("dropout needs a probability p in [0, 1)");
    // p = 0 is the identity: no mask is drawn or kept.
    if (failed(c.expectResults(p > 0 ? 2 : 1)) || failed(c.setResult(0, x)))
      return failure();
    if (p == 0)
      return success();
    TensorType mask = x;
    mask.dtype = DType::U8;
    return c.setResult(1, mask);
  }
  if (failed(c.expectResults(1)))
    return failure();
  return c.setResult(0, x);
}

LogicalResult inferBinary(RuleContext &c) {
  if (failed(c.expectOperands(2, 2)) || failed(c.expectResults(1)))
    return failure();
  const TensorType &x = c.op.operands[0]->type, &y = c.op.operands[1]->type;
  bool gradAccumulate = c.op.kind == OpKind::GradAdd;
  if (!gradAccumulate && (failed(c.expectActivation(0)) || failed(c.expectActivation(1))))
    return failure();
  TensorType a = x, b = y;
  a.role = b.role = Role::Act;
  if (!a.equals(b))
    return c.error(opName(c.op.kind).str() + " operands differ: " + c.str(x) + " vs " + c.str(y));
  return c.setResult(0, gradAccumulate ? x : a);
}

LogicalResult inferCrossEntropy(RuleContext &c) {
  const bool fused = c.op.boolAttr("fused", true);
  if (failed(c.expectOperands(2, 2)) || failed(c.expectResults(fused ? 2 : 3)) ||
      failed(c.expectActivation(0, 3)))
    return failure();
  const TensorType &logits = c.op.operands[0]->type, &targets = c.op.operands[1]->type;
  if (targets.dtype != DType::I32 || targets.rank() != 2 ||
      !exprEqual(targets.shape[0], logits.shape[0]) ||
      !exprEqual(targets.shape[1], logits.shape[1]))
    return c.error("cross_entropy targets must be i32 " + c.str(logits.shape[0]) + " x " +
                   c.str(logits.shape[1]) + ", got " + c.str(targets));
  if (failed(c.setResult(0, c.act(DType::F32, {}))))
    return failure();
  // Per token: running max and log-sum-exp (all-reduced across tp when the
  // vocabulary is sharded).
  if (failed(c.setResult(1, c.act(DType::F32, {logits.shape[0], logits.shape[1], 2}))))
    return failure();
  if (fused)
    return success();
  // Unfused: the logits upcast to fp32 become the softmax the backward reads
  // (Megatron-LM's vocab-parallel cross entropy), sharded like the logits.
  TensorType probs = logits;
  probs.dtype = DType::F32;
  return c.setResult(2, probs);
}

LogicalResult inferTpCopy(RuleContext &c) {
  if (failed(c.expectOperands(1, 1)) || failed(c.expectResults(1)) || failed(c.expectActivation(0)))
    return failure();
  if (c.op.operands[0]->type.isSharded())
    return c.error("tp_copy expects a replicated input");
  return c.setResult(0, c.op.operands[0]->type);
}

LogicalResult inferAllReduce(RuleContext &c) {
  if (failed(c.expectOperands(1, 1)) || failed(c.expectResults(1)))
    return failure();
  TensorType t = c.op.operands[0]->type;
  // Forward: completes a partial sum. Backward: sums an activation gradient.
  if (!t.partial && t.role != Role::Act)
    return c.error("all_reduce expects a partial sum or an activation gradient");
  t.partial = false;
  return c.setResult(0, t);
}

/// Sequence parallelism's all-gather: [b*s/tp, c] split along the tokens
/// becomes [b, s, c], whole on every rank.
LogicalResult inferAllGather(RuleContext &c) {
  if (failed(c.expectOperands(1, 1)) || failed(c.expectResults(1)))
    return failure();
  const TensorType &x = c.op.operands[0]->type;
  const Symbol *b = c.m.symbols.ofKind(SymbolKind::Batch), *s = c.m.symbols.ofKind(SymbolKind::Seq);
  if (!x.isTokenSplit() || x.rank() != 2 || x.partial)
    return c.error("all_gather expects an activation split along the tokens ([b*s/tp, "
                   "channels] shard(0)), got " +
                   c.str(x));
  if (!b || !s)
    return c.error("all_gather needs the module's batch and sequence symbols");
  TensorType y = x;
  y.shardAxis = -1;
  y.shape = {b->sym, s->sym, x.shape[1]};
  return c.setResult(0, y);
}

/// Sequence parallelism's reduce-scatter: a partial sum [b, s, c] becomes
/// this rank's part of the sum, [b*s/tp, c] split along the tokens.
LogicalResult inferReduceScatter(RuleContext &c) {
  if (failed(c.expectOperands(1, 1)) || failed(c.expectResults(1)))
    return failure();
  const TensorType &x = c.op.operands[0]->type;
  if (!x.partial || x.role != Role::Act || x.rank() != 3 || x.isSharded())
    return c.error("reduce_scatter expects a partial sum [b, s, channels], got " + c.str(x));
  TensorType y = x;
  y.partial = false;
  y.shardAxis = 0;
  y.shape = {x.shape[0] * x.shape[1] / c.tp, x.shape[2]};
  return c.setResult(0, y);
}

} // namespace

LogicalResult mist::inferOpTypes(Op &op, Module &m, DiagnosticEngine &diag) {
  RuleContext c(op, m, diag);
  switch (op.kind) {
  case OpKind::Param:
    return inferParam(c);
  case OpKind::Embedding:
    return inferEmbedding(c);
  case OpKind::PositionEmbedding:
    return inferPositionEmbedding(c);
  case OpKind::LayerNorm:
    return inferNorm(c, 2);
  case OpKind::RMSNorm:
    return inferNorm(c, 1);
  case OpKind::Linear:
    return inferLinear(c);
  case OpKind::LMHead:
    return inferLMHead(c);
  case OpKind::Attention:
    return inferAttention(c);
  case OpKind::Rope:
    return inferRope(c);
  case OpKind::Slice:
    return inferSlice(c);
  case OpKind::Concat:
    return inferConcat(c);
  case OpKind::Gelu:
  case OpKind::Silu:
  case OpKind::Dropout:
    return inferUnary(c);
  case OpKind::Mul:
  case OpKind::Add:
  case OpKind::GradAdd:
    return inferBinary(c);
  case OpKind::CrossEntropy:
    return inferCrossEntropy(c);
  case OpKind::TpCopy:
    return inferTpCopy(c);
  case OpKind::AllReduce:
    return inferAllReduce(c);
  case OpKind::AllGather:
    return inferAllGather(c);
  case OpKind::ReduceScatter:
    return inferReduceScatter(c);
  default:
    // Gradient ops are typed by the backward pass from their forward op.
    for (auto &r : op.results)
      if (!r->typed)
        return c.error("gradient result '%" + r->name + "' has no type");
    return success();
  }
}

SavedSet mist::savedForBackward(const Op &op) {
  SavedSet s;
  auto allOperands = [&] {
    for (unsigned i = 0; i < op.operands.size(); ++i)
      s.operands.push_back(i);
  };
  switch (op.kind) {
  case OpKind::Embedding:
    s.operands = {0};
    break; // token ids
  case OpKind::LayerNorm:
  case OpKind::RMSNorm: // input, scale (and bias), and the row statistics
    allOperands();
    s.results = {1};
    break;
  case OpKind::Linear:
  case OpKind::LMHead:
    s.operands = {0, 1};
    break; // input and weight
  case OpKind::Attention:
    allOperands();
    if (op.boolAttr("flash", true))
      s.results = {0, 1}; // output and log-sum-exp; scores are recomputed
    else if (op.results.size() == 4)
      s.results = {1, 2, 3}; // probabilities, dropout mask, dropped probabilities
    else
      s.results = {1};
    break;
  case OpKind::Gelu:
  case OpKind::Silu:
    s.operands = {0};
    break;
  case OpKind::Dropout: // the mask, when there is one
    if (op.results.size() == 2)
      s.results = {1};
    break;
  case OpKind::Mul:
    s.operands = {0, 1};
    break;
  case OpKind::CrossEntropy:
    if (op.boolAttr("fused", true)) {
      s.operands = {0, 1}; // logits (the backward recomputes the softmax)
      s.results = {1};
    } else {
      s.operands = {1}; // the fp32 softmax instead of the logits
      s.results = {1, 2};
    }
    break;
  default:
    break; // position_embedding, rope: nothing; identity-gradient ops
  }
  return s;
}

bool mist::recomputedSelectively(OpKind kind) {
  switch (kind) {
  case OpKind::LayerNorm:
  case OpKind::RMSNorm:
  case OpKind::Gelu:
  case OpKind::Silu:
  case OpKind::Mul:
    return true;
  default:
    return false;
  }
}

bool mist::fusesWithNext(OpKind first, OpKind second, bool firstRowParallel, bool secondTanhGelu,
                         bool firstResultReadOnce) {
  const bool geluForward =
      first == OpKind::Linear && second == OpKind::Gelu && secondTanhGelu && !firstRowParallel;
  const bool geluBackward = first == OpKind::LinearGrad && second == OpKind::GeluGrad &&
                            secondTanhGelu && firstResultReadOnce;
  const bool residualNorm =
      first == OpKind::Add && (second == OpKind::LayerNorm || second == OpKind::RMSNorm);
  return geluForward || geluBackward || residualNorm;
}

bool mist::forwardsOperand(const Op &op, bool singleTpRank) {
  switch (op.kind) {
  case OpKind::TpCopy:
    return true;
  case OpKind::Dropout:
  case OpKind::DropoutGrad:
    return op.realAttr("p").value_or(0) == 0 && op.results.size() == 1;
  case OpKind::AllReduce:
  case OpKind::AllGather:
  case OpKind::ReduceScatter:
    return singleTpRank;
  default:
    return false;
  }
}

std::vector<const char *> mist::extraResultSuffixes(OpKind kind, const AttrMap &attrs) {
  auto flag = [&](const char *name, bool dflt) {
    auto it = attrs.find(name);
    if (it == attrs.end())
      return dflt;
    auto *b = std::get_if<bool>(&it->second);
    return b ? *b : dflt;
  };
  switch (kind) {
  case OpKind::LayerNorm:
  case OpKind::RMSNorm:
    return {".stats"};
  case OpKind::Dropout: {
    auto it = attrs.find("p");
    auto *p = it == attrs.end() ? nullptr : std::get_if<double>(&it->second);
    if (p && *p > 0)
      return {".mask"};
    return {};
  }
  case OpKind::CrossEntropy:
    if (!flag("fused", true))
      return {".stats", ".probs"};
    return {".stats"};
  case OpKind::Attention: {
    if (flag("flash", true))
      return {".lse"};
    auto it = attrs.find("dropout");
    double p = 0;
    if (it != attrs.end())
      if (auto *d = std::get_if<double>(&it->second))
        p = *d;
    if (p > 0)
      return {".probs", ".mask", ".dropped"};
    return {".probs"};
  }
  default:
    return {};
  }
}
