//===- ModelProfile.cpp - A costed module, compiled for the perf model ----===//
#include "perfmodel/ModelProfile.h"

#include "perfmodel/KernelTimes.h"

#include "ir/OpSemantics.h"
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

using namespace mist;

namespace {

/// Keeps only candidates no other candidate dominates for every b, tp.
std::vector<Poly> pruneDominated(std::vector<Poly> cands) {
  std::vector<Poly> kept;
  for (size_t i = 0; i < cands.size(); ++i) {
    bool dominated = false;
    for (size_t j = 0; j < cands.size() && !dominated; ++j) {
      if (i == j || !cands[j].dominates(cands[i]))
        continue;
      // Equal candidates: keep the first one only.
      dominated = !cands[i].dominates(cands[j]) || j < i;
    }
    if (!dominated)
      kept.push_back(cands[i]);
  }
  return kept;
}

/// max(A) + max(B) as candidates: every a + b, the dominated ones dropped.
std::vector<Poly> sumsOfPairs(const std::vector<Poly> &a, const std::vector<Poly> &b) {
  if (b.empty())
    return a;
  std::vector<Poly> sums;
  for (const Poly &x : a)
    for (const Poly &y : b)
      sums.push_back(x + y);
  return pruneDominated(std::move(sums));
}

class RegionBuilder {
public:
  RegionBuilder(const Module &m, const Region &r, DiagnosticEngine &diag)
      : m(m), r(r), diag(diag) {}

  std::optional<RegionProfile> build() {
    RegionProfile p;
    Expr params = 0;
    for (auto &op : r.fwd.ops)
      if (op->kind == OpKind::Param)
        params += op->result()->type.numElements();
    if (!compile(params, p.params))
      return std::nullopt;
    if (!compile(tiedParams(), p.tiedParams))
      return std::nullopt;
    findSequenceSplit();
    fwdList = &p.fwd;
    for (auto &op : r.fwd.ops)
      if (op->kind != OpKind::Param && !addOp(*op, p.fwd))
        return std::nullopt;
    for (auto &op : r.bwd->ops)
      if (!addOp(*op, p.bwd))
        return std::nullopt;
    // Sequence parallelism's all-gathers: a column-parallel op's input in
    // the forward (where tp_copy passes it through) and again in the
    // backward for its weight gradient, and in the backward the gradient a
    // partial sum's reader needs whole (where all_reduce's gradient passes
    // through).
    for (auto &op : r.fwd.ops) {
      if (op->kind == OpKind::TpCopy &&
          (!addSpGather(*op, p.fwd) || !addSpGather(*op, p.bwd, /*besideGemm=*/true)))
        return std::nullopt;
      if (op->kind == OpKind::AllReduce && !addSpGather(*op, p.bwd))
        return std::nullopt;
    }
    for (auto &[key, dst] : {std::pair{"fwd_flops", &p.fwdFlops}, {"bwd_flops", &p.bwdFlops}})
      if (!compile(r.summary->get(key).value_or(0), *dst))
        return std::nullopt;
    liveness(p.memory, /*singleTpRank=*/false, /*sp=*/false);
    liveness(p.memoryAtTp1, /*singleTpRank=*/true, /*sp=*/false);
    liveness(p.memorySp, /*singleTpRank=*/false, /*sp=*/true);
    for (auto &a : r.bwd->args) {
      p.gradIn = p.gradIn + bytes(a.get());
      p.gradInSp = p.gradInSp + bytesUnder(a.get(), true);
    }
    for (const Value *y : r.fwd.yields)
      if (isActivation(y)) {
        p.output = p.output + bytes(y);
        p.outputSp = p.outputSp + bytesUnder(y, true);
      }
    return p;
  }

private:
  /// Elements of the parameters the region's ops read that no `param` op
  /// of the region declares.
  Expr tiedParams() const {
    std::set<const Value *> declared, counted;
    for (auto &op : r.fwd.ops)
      if (op->kind == OpKind::Param)
        declared.insert(op->result());
    Expr elements = 0;
    for (auto &op : r.fwd.ops)
      for (const Value *v : op->operands)
        if (v->typed && v->type.role == Role::Param && !declared.count(v) &&
            counted.insert(v).second)
          elements += v->type.numElements();
    return elements;
  }

  bool compile(const Expr &e, Poly &out) {
    auto p = Poly::compile(e, m.symbols);
    if (!p) {
      diag.error({}, "cost '" + printExpr(e, m.symbols) +
                         "' depends on symbols other than b and tp after binding the model sizes");
      return false;
    }
    out = *p;
    return true;
  }

  /// The GEMMs of linear and lm_head (forward: Y = X W; backward: dX =
  /// dY W^T and dW = X^T dY) and the geometry of flash attention, for the
  /// shape model of kernel times (perfmodel/KernelTimes.h).
  bool addKernelShapes(const Op &op, OpProfile &p) {
    auto rows = [](const TensorType &t) { return t.numElements() / t.shape.back(); };
    auto gemm = [&](const Expr &m, const Expr &n, const Expr &k) {
      GemmShape g;
      if (!compile(m, g.m) || !compile(n, g.n) || !compile(k, g.k))
        return false;
      p.gemms.push_back(std::move(g));
      return true;
    };
    switch (op.kind) {
    case OpKind::Linear:
    case OpKind::LMHead: {
      const TensorType &x = op.operands[0]->type, &y = op.result()->type;
      return x.shape.empty() || y.shape.empty() || gemm(rows(x), y.shape.back(), x.shape.back());
    }
    case OpKind::LinearGrad:
    case OpKind::LMHeadGrad: {
      const TensorType &dy = op.operands[0]->type, &x = op.operands[1]->type;
      if (dy.shape.empty() || x.shape.empty())
        return true;
      return gemm(rows(x), x.shape.back(), dy.shape.back()) &&
             gemm(x.shape.back(), dy.shape.back(), rows(x));
    }
    case OpKind::Attention:
    case OpKind::AttentionGrad: {
      bool backward = op.kind == OpKind::AttentionGrad;
      const TensorType &out = backward ? op.operands[0]->type : op.result()->type;
      auto headDim = op.dimAttr("head_dim");
      if (out.rank() != 3 || !headDim)
        return true;
      AttentionShape a;
      a.causal = op.boolAttr("causal", true);
      a.backward = backward;
      a.flash = op.boolAttr("flash", true);
      a.dropout = op.realAttr("dropout").value_or(0.0) > 0;
      if (!compile(out.shape[0], a.batch) || !compile(out.shape[1], a.seq) ||
          !compile(out.shape[2] / *headDim, a.heads))
        return false;
      p.attention = std::move(a);
      return true;
    }
    default:
      return true;
    }
  }

  /// The activations sequence parallelism splits along the sequence: every
  /// one tp replicates (the region's inputs, and what its ops compute),
  /// except the module's inputs (the embedding and the vocab-parallel loss
  /// read all tokens), a tp_copy's result (the all-gathered input of a
  /// column-parallel op) and partial sums (before their reduce-scatter).
  void findSequenceSplit() {
    auto consider = [&](const Value *v) {
      if (isActivation(v) && !v->type.isSharded() && !v->type.partial)
        seqSplit.insert(v);
    };
    for (const Block *b : {&r.fwd, &*r.bwd}) {
      for (auto &a : b->args)
        consider(a.get());
      for (auto &op : b->ops)
        if (op->kind != OpKind::TpCopy)
          for (auto &res : op->results)
            consider(res.get());
    }
  }

  /// Whether every activation the op reads or writes is split along the
  /// sequence under sequence parallelism (then so is its work).
  bool splitUnderSp(const Op &op) const {
    bool any = false, all = true;
    auto visit = [&](const Value *v) {
      if (isActivation(v)) {
        any = true;
        all = all && seqSplit.count(v);
      }
    };
    for (const Value *v : op.operands)
      visit(v);
    for (auto &res : op.results)
      visit(res.get());
    return any && all;
  }

  /// An all-gather of `op`'s result (a tp_copy's or an all_reduce's: the
  /// whole, replicated tensor) that only sequence parallelism runs.
  bool addSpGather(const Op &op, std::vector<OpProfile> &list, bool besideGemm = false) {
    OpProfile p;
    p.kind = OpKind::TpCopy;
    p.name = op.results[0]->name + (besideGemm ? ".regather" : ".gather");
    p.tpCollective = true;
    p.onlyUnderSp = true;
    p.besideGemm = besideGemm;
    if (!compile(op.result()->type.bytes(), p.comm))
      return false;
    list.push_back(std::move(p));
    return true;
  }

  /// Whether a backward op reads `v` (or a tp_copy of it, which passes it
  /// through): the forward keeps it.
  bool readByBackward(const Value *v) const {
    for (auto &op : r.bwd->ops)
      for (const Value *x : op->operands)
        if (x == v || (x->def && x->def->kind == OpKind::TpCopy && x->def->operands[0] == v))
          return true;
    return false;
  }

  bool addOp(const Op &op, std::vector<OpProfile> &list) {
    if (forwardsOperand(op, /*singleTpRank=*/false))
      return true; // nothing runs (all_reduce at tp = 1 is priced as a no-op already)
    OpProfile p;
    p.kind = op.kind;
    p.name = op.results.empty() ? std::string(opName(op.kind)) : op.results[0]->name;
    OpCost c = op.cost.value_or(OpCost{});
    if (!compile(c.flops, p.flops) || !compile(c.read + c.write, p.bytes) ||
        !compile(c.comm, p.comm))
      return false;
    bool attention = op.kind == OpKind::Attention || op.kind == OpKind::AttentionGrad;
    if (attention && op.boolAttr("causal", true) && op.boolAttr("flash", true))
      p.flopDiscount = 0.5;
    p.tpCollective = op.kind == OpKind::AllReduce || !c.comm.expand().is_zero();
    p.splitUnderSp = !p.tpCollective && splitUnderSp(op);
    p.selectiveRecompute = &list == fwdList && recomputedSelectively(op.kind) &&
                           !op.results.empty() && readByBackward(op.result());
    if (!addKernelShapes(op, p))
      return false;
    for (const Value *v : op.operands) {
      std::vector<Poly> shape;
      for (const Expr &d : v->type.shape) {
        Poly dp;
        if (!compile(d, dp))
          return false;
        shape.push_back(dp);
      }
      p.operandShapes.push_back(std::move(shape));
    }
    list.push_back(std::move(p));
    return true;
  }

  static bool isActivation(const Value *v) { return v->typed && v->type.role == Role::Act; }

  Poly bytes(const Value *v) {
    Poly pv;
    compile(v->type.bytes(), pv);
    return pv;
  }
  /// Its bytes per rank, with or without sequence parallelism.
  Poly bytesUnder(const Value *v, bool sp) {
    return sp && seqSplit.count(v) ? bytes(v).overTp() : bytes(v);
  }

  /// When each activation of the region is live, at program points:
  /// forward ops 0..F-1, then backward ops F..F+B-1 (-1: before the forward).
  struct Lifetimes {
    /// A value an op passes through is its operand's memory: every use of it
    /// is a use of that (root) value.
    std::map<const Value *, const Value *> rootOf;
    std::map<const Value *, int> def, lastFwdUse, lastUse;
    std::vector<const Value *> order; ///< in the order they are defined
    const Value *root(const Value *v) const {
      auto it = rootOf.find(v);
      return it == rootOf.end() ? v : it->second;
    }
  };

  /// Each op's program point in its block: its index, but where the trainer
  /// runs it fused with the op before (ir/OpSemantics.h, fusesWithNext;
  /// params and ops that run nothing in between), that op's: a pair is one
  /// op, what either touches live at once.
  static std::vector<int> programPoints(const Block &b, bool singleTpRank, bool sp) {
    std::map<const Value *, int> readers;
    for (auto &op : b.ops)
      for (const Value *v : op->operands)
        ++readers[v];
    std::vector<int> at(b.ops.size());
    int previous = -1; // the last op that runs, and whether it starts a pair
    bool pairOpen = false;
    for (size_t i = 0; i < b.ops.size(); ++i) {
      at[i] = int(i);
      const Op &op = *b.ops[i];
      if (op.kind == OpKind::Param ||
          (forwardsOperand(op, singleTpRank) && !(sp && op.kind == OpKind::TpCopy)))
        continue;
      if (previous >= 0 && !pairOpen) {
        const Op &first = *b.ops[size_t(previous)];
        const bool yielded =
            !first.results.empty() && llvm::is_contained(b.yields, first.results[0].get());
        if (!first.results.empty() && !op.operands.empty() &&
            op.operands[0] == first.results[0].get() &&
            fusesWithNext(first.kind, op.kind, first.enumAttr("shard", "none") == "row",
                          op.boolAttr("approximate", true),
                          readers[first.results[0].get()] == 1 && !yielded)) {
          at[i] = at[size_t(previous)];
          pairOpen = true;
          previous = int(i);
          continue;
        }
      }
      pairOpen = false;
      previous = int(i);
    }
    return at;
  }

  /// Under sequence parallelism a tp_copy all-gathers into a buffer of its
  /// own instead of passing its operand through, and the backward
  /// re-gathers it from the split operand, which is what stays saved, into
  /// a transient of its own (`regatheredCopy`), live from the first
  /// backward read to the last, as the trainer runs it.
  Lifetimes lifetimes(bool singleTpRank, bool sp) const {
    const int F = static_cast<int>(r.fwd.ops.size()), B = static_cast<int>(r.bwd->ops.size());
    Lifetimes lt;
    std::map<const Value *, const Value *> gatheredFrom;
    if (sp)
      for (auto &op : r.fwd.ops)
        if (op->kind == OpKind::TpCopy)
          gatheredFrom[op->result()] = op->operands[0];
    auto define = [&](const Value *v, int at) {
      if (!isActivation(v) || lt.def.count(v))
        return;
      lt.def[v] = at;
      lt.lastFwdUse[v] = at;
      lt.lastUse[v] = at;
      lt.order.push_back(v);
    };
    auto use = [&](const Value *v, int at) {
      if (auto it = gatheredFrom.find(v); it != gatheredFrom.end() && at >= F) {
        const Value *again = regatheredCopy(v);
        define(again, at);
        lt.lastUse[again] = std::max(lt.lastUse[again], at);
        v = it->second;
      }
      v = lt.root(v);
      if (!lt.def.count(v))
        return; // params, module inputs, values of other regions
      lt.lastUse[v] = std::max(lt.lastUse[v], at);
      if (at < F)
        lt.lastFwdUse[v] = std::max(lt.lastFwdUse[v], at);
    };
    auto visit = [&](const Op &op, int at) {
      if (forwardsOperand(op, singleTpRank) && !(sp && op.kind == OpKind::TpCopy)) {
        lt.rootOf[op.result()] = lt.root(op.operands[0]);
        use(op.operands[0], at);
        return;
      }
      for (const Value *v : op.operands)
        use(v, at);
      // The gradient op of a partial sum's producer reads its incoming
      // gradient whole: all-gathered from the split one into a transient.
      if (sp && at >= F && readsGatheredGradient(op)) {
        const Value *whole = regatheredCopy(op.operands[0]);
        define(whole, at);
        lt.lastUse[whole] = std::max(lt.lastUse[whole], at);
      }
      for (auto &res : op.results)
        define(res.get(), at);
    };
    for (auto &a : r.fwd.args)
      define(a.get(), -1);
    // The module's inputs (tokens, targets) are loaded per micro-batch
    // before its forward and kept, like a region input, while a backward
    // reads them (embedding_grad, cross_entropy_grad).
    for (auto &in : m.inputs)
      for (int i = 0; i < F; ++i)
        if (llvm::is_contained(r.fwd.ops[i]->operands, in.get())) {
          define(in.get(), -1);
          break;
        }
    const std::vector<int> fwdAt = programPoints(r.fwd, singleTpRank, sp),
                           bwdAt = programPoints(*r.bwd, singleTpRank, sp);
    for (int i = 0; i < F; ++i)
      visit(*r.fwd.ops[i], fwdAt[size_t(i)]);
    for (const Value *y : r.fwd.yields)
      use(y, F - 1);
    for (auto &a : r.fwd.args) // a checkpoint keeps the layer input
      if (lt.def.count(a.get()))
        lt.lastFwdUse[a.get()] = std::max(lt.lastFwdUse[a.get()], F - 1);
    for (auto &a : r.bwd->args)
      define(a.get(), F);
    for (int i = 0; i < B; ++i)
      visit(*r.bwd->ops[i], F + bwdAt[size_t(i)]);
    for (const Value *y : r.bwd->yields)
      use(y, F + B - 1);
    return lt;
  }

  /// The trainer places a run's transients (what the forward computes and
  /// no backward reads; what the backward computes but the gradient it
  /// hands on) in one arena held for the whole run, sized by the run's
  /// largest live set of them (runtime/trainer/StageMemory.h). The rest
  /// (saved activations, the inputs and outputs runs hand on) is live
  /// from its definition to its last use.
  std::set<const Value *> arenaValues(const Lifetimes &lt) const {
    const int F = static_cast<int>(r.fwd.ops.size());
    std::set<const Value *> handedOn;
    for (const std::vector<Value *> *values : {&r.fwd.yields, &r.bwd->yields})
      for (const Value *v : *values)
        handedOn.insert(lt.root(v));
    for (auto &a : r.bwd->args)
      handedOn.insert(a.get());
    std::set<const Value *> arena;
    for (const Value *v : lt.order) {
      const int def = lt.def.at(v);
      if (!handedOn.count(v) && def >= 0 && (def < F ? lt.lastUse.at(v) < F : true))
        arena.insert(v);
    }
    return arena;
  }

  /// Candidate peaks of each run: per program point, the live bytes outside
  /// the arena (all of them, or, for a checkpointed forward, those up to
  /// their last forward use) plus the arena's size; dominated ones dropped.
  void peaks(RegionMemory &p, const Lifetimes &lt, const std::set<const Value *> &arenaSet,
             const std::set<const Value *> &dropped,
             const std::map<const Value *, Poly> &size) const {
    const int F = static_cast<int>(r.fwd.ops.size()), B = static_cast<int>(r.bwd->ops.size());
    std::vector<Poly> fwdFull, fwdCkpt, fwdSelective, bwd, fwdArena, bwdArena;
    for (int i = 0; i < F + B; ++i) {
      Poly full, ckpt, selective, arena;
      for (const Value *v : lt.order) {
        const bool transient = arenaSet.count(v);
        const int def = lt.def.at(v);
        if (def <= i && i <= lt.lastUse.at(v))
          (transient ? arena : full) = (transient ? arena : full) + size.at(v);
        if (i < F && !transient && def <= i && i <= lt.lastFwdUse.at(v))
          ckpt = ckpt + size.at(v);
        const int end = dropped.count(v) ? lt.lastFwdUse.at(v) : lt.lastUse.at(v);
        if (i < F && !transient && def <= i && i <= end)
          selective = selective + size.at(v);
      }
      if (i < F) {
        fwdFull.push_back(full);
        fwdCkpt.push_back(ckpt);
        fwdSelective.push_back(selective);
        fwdArena.push_back(arena);
      } else {
        bwd.push_back(full);
        bwdArena.push_back(arena);
      }
    }
    fwdArena = pruneDominated(fwdArena);
    bwdArena = pruneDominated(bwdArena);
    fwdFull = sumsOfPairs(pruneDominated(fwdFull), fwdArena);
    fwdCkpt = sumsOfPairs(pruneDominated(fwdCkpt), fwdArena);
    fwdSelective = sumsOfPairs(pruneDominated(fwdSelective), fwdArena);
    bwd = sumsOfPairs(pruneDominated(bwd), bwdArena);
    p.fwdPeakFull = pruneDominated(fwdFull);
    p.fwdPeakCkpt = pruneDominated(fwdCkpt);
    p.fwdPeakSelective = pruneDominated(fwdSelective);
    p.bwdPeak = pruneDominated(bwd);
    for (std::vector<Poly> *peak :
         {&p.fwdPeakFull, &p.fwdPeakCkpt, &p.fwdPeakSelective, &p.bwdPeak})
      if (peak->empty())
        peak->push_back(Poly());
  }

  /// What selective recomputation drops after the forward: the saved first
  /// results of the ops it runs again (recomputedSelectively), but what the
  /// region hands on.
  std::set<const Value *> selectivelyDropped(const Lifetimes &lt) const {
    const int F = static_cast<int>(r.fwd.ops.size());
    std::set<const Value *> handedOn;
    for (const Value *y : r.fwd.yields)
      handedOn.insert(lt.root(y));
    std::set<const Value *> dropped;
    for (const Value *v : lt.order)
      if (v->def && v == v->def->results[0].get() && recomputedSelectively(v->def->kind) &&
          lt.def.at(v) < F && lt.lastUse.at(v) >= F && !handedOn.count(v))
        dropped.insert(v);
    return dropped;
  }

  /// A run's peak is the largest live set outside the arena plus its arena;
  /// what the backward reads is saved (all of it, or with checkpointing the
  /// layer inputs).
  void liveness(RegionMemory &p, bool singleTpRank, bool sp) {
    const int F = static_cast<int>(r.fwd.ops.size());
    Lifetimes lt = lifetimes(singleTpRank, sp);
    std::map<const Value *, Poly> size;
    for (const Value *v : lt.order)
      size[v] = bytesUnder(v, sp);
    const std::set<const Value *> dropped = selectivelyDropped(lt);
    peaks(p, lt, arenaValues(lt), dropped, size);
    for (const Value *v : lt.order) {
      if (lt.def.at(v) < F && lt.lastUse.at(v) >= F) {
        p.savedFull = p.savedFull + size[v];
        if (!dropped.count(v))
          p.savedSelective = p.savedSelective + size[v];
      }
    }
    for (auto &a : r.fwd.args)
      p.savedCkpt = p.savedCkpt + bytesUnder(a.get(), sp);
  }

  /// Whether a backward op is the gradient of an op whose result is a
  /// partial sum over tp (a row-parallel linear, a vocabulary-parallel
  /// embedding): under sequence parallelism its incoming gradient is split
  /// and it reads it all-gathered.
  static bool readsGatheredGradient(const Op &op) {
    return (op.kind == OpKind::LinearGrad && op.enumAttr("shard", "none") == "row") ||
           (op.kind == OpKind::EmbeddingGrad && op.enumAttr("shard", "none") == "vocab");
  }

  /// The backward's all-gather of `gathered` (a tp_copy's result, or the
  /// incoming gradient readsGatheredGradient names) under sequence
  /// parallelism: a value of the same type, made once, whole.
  const Value *regatheredCopy(const Value *gathered) const {
    std::unique_ptr<Value> &again = regathered[gathered];
    if (!again) {
      again = std::make_unique<Value>(*gathered);
      again->name += ".regathered";
      again->def = nullptr;
    }
    return again.get();
  }

  const Module &m;
  const Region &r;
  DiagnosticEngine &diag;
  std::set<const Value *> seqSplit;                                   ///< findSequenceSplit
  mutable std::map<const Value *, std::unique_ptr<Value>> regathered; ///< regatheredCopy
  const std::vector<OpProfile> *fwdList = nullptr; ///< the profile's forward ops, being built
};

double maxOf(const std::vector<Poly> &cands, double b, double tp) {
  double best = 0;
  for (const Poly &p : cands)
    best = std::max(best, p.eval(b, tp));
  return best;
}

/// The measured time of an op at this shape, when the profile has one.
std::optional<double> measuredTime(const OpProfile &op, int b, int tp, const Cluster &c) {
  if (c.device.measured.empty())
    return std::nullopt;
  std::string key = measuredShapeKey(op, b, tp);
  for (const MeasuredOp &mo : c.device.measured)
    if (mo.op == opName(op.kind) && mo.shape == key)
      return mo.seconds;
  return std::nullopt;
}

/// Seconds of one op's kernels: the shape model for GEMMs and flash
/// attention where the device has its figures, else the roofline; never
/// faster than moving the op's bytes. Attention without flash also moves
/// its score matrix between its kernels (KernelTimes.h).
double kernelSeconds(const OpProfile &op, int b, int tp, const DeviceProfile &d, bool fp32Training,
                     double elementBytes) {
  const double peak = d.matmulPeakTflops(fp32Training) * 1e12;
  const double flopRate = peak * d.matmulEfficiency;
  const double byteRate = d.memBandwidthGBs * 1e9 * d.memEfficiency;
  const double memory = byteRate > 0 ? op.bytes.eval(b, tp) / byteRate : 0;
  const double flops = op.flops.eval(b, tp) * op.flopDiscount;
  double compute = flopRate > 0 ? flops / flopRate : 0;
  if (!op.gemms.empty() && d.sms > 0) {
    compute = 0;
    for (const GemmShape &g : op.gemms)
      compute += gemmComputeSeconds(d, flopRate, g.m.eval(b, tp), g.n.eval(b, tp), g.k.eval(b, tp));
  } else if (const auto &a = op.attention) {
    const double batch = a->batch.eval(b, tp), heads = a->heads.eval(b, tp),
                 seq = a->seq.eval(b, tp);
    if (!a->flash) {
      double scores = scoreMatrixBytes(batch, heads, seq, elementBytes, a->dropout, a->backward);
      return std::max(compute, memory) + (byteRate > 0 ? scores / byteRate : 0);
    }
    double eff = attentionEfficiency(d, batch, heads, seq, a->causal, a->backward);
    if (eff > 0 && peak > 0)
      compute = flops / (peak * eff);
  }
  return std::max(compute, memory);
}

/// The collective a tp op runs: all-reduce, or under sequence parallelism
/// a reduce-scatter (a partial sum's, forward or backward) or all-gather.
Collective tpCollectiveKind(const OpProfile &op, bool sp) {
  if (sp && op.onlyUnderSp)
    return Collective::AllGather;
  return sp && op.kind == OpKind::AllReduce ? Collective::ReduceScatter : Collective::AllReduce;
}

/// Seconds of a region's ops, summed: kernels (`compute`, of which GEMMs
/// also in `gemm`) and tp collectives (`tpComm`; those beside GEMMs in
/// `tpBeside`).
void opTimes(const std::vector<OpProfile> &ops, int b, int tp, const Cluster &c, bool fp32Training,
             double elementBytes, bool sp, double &compute, double &gemm, double &tpComm,
             double &tpBeside) {
  sp = sp && tp > 1;
  for (const OpProfile &op : ops) {
    if (op.onlyUnderSp && !sp)
      continue;
    if (op.tpCollective) {
      // At tp = 1 the collectives are no-ops.
      if (tp > 1) {
        int gpn = std::min(tp, c.gpusPerNode), nodes = (tp + gpn - 1) / gpn;
        (op.besideGemm ? tpBeside : tpComm) +=
            collectiveSeconds(c, tpCollectiveKind(op, sp), op.comm.eval(b, tp), nodes, gpn);
      }
    }
    if (!looksUpMeasured(op))
      continue;
    double seconds = 0;
    if (auto t = measuredTime(op, b, tp, c))
      seconds = *t;
    else
      seconds = kernelSeconds(op, b, tp, c.device, fp32Training, elementBytes);
    // Split along the sequence, the op runs on a tp-th of its rows (the
    // measured table holds the whole op's shape).
    if (sp && op.splitUnderSp)
      seconds /= tp;
    compute += seconds;
    if (!op.gemms.empty())
      gemm += seconds;
  }
}

} // namespace

std::string mist::measuredShapeKey(const OpProfile &op, int b, int tp) {
  std::string key;
  for (size_t i = 0; i < op.operandShapes.size(); ++i) {
    key += i ? "," : "";
    for (size_t j = 0; j < op.operandShapes[i].size(); ++j) {
      if (j)
        key += 'x';
      key += std::to_string(static_cast<long long>(op.operandShapes[i][j].eval(b, tp)));
    }
  }
  return key;
}

bool mist::looksUpMeasured(const OpProfile &op) {
  return op.kind != OpKind::AllReduce && !op.onlyUnderSp;
}

std::vector<std::pair<std::string, std::string>> ModelProfile::measuredLookups(int b,
                                                                               int tp) const {
  std::vector<std::pair<std::string, std::string>> keys;
  for (const RegionProfile *r : {&pre, &layer, &post})
    for (const std::vector<OpProfile> *ops : {&r->fwd, &r->bwd})
      for (const OpProfile &op : *ops)
        if (looksUpMeasured(op))
          keys.emplace_back(opName(op.kind).str(), measuredShapeKey(op, b, tp));
  return keys;
}

RegionNumbers ModelProfile::evaluate(RegionKind kind, int b, int tp, const Cluster &c,
                                     bool sequenceParallel) const {
  const bool sp = sequenceParallel && tp > 1;
  const RegionProfile &p = region(kind);
  RegionNumbers n;
  n.params = p.params.eval(b, tp);
  n.tiedParams = p.tiedParams.eval(b, tp);
  n.paramBytes = paramBytes;
  n.gradBytes = gradBytes;
  n.stateBytes = stateBytes;
  n.mastersAreWeights = mastersAreWeights;
  double none = 0; // the forward has nothing beside its GEMMs
  opTimes(p.fwd, b, tp, c, fp32Training, paramBytes, sp, n.fwdCompute, n.gemmFwd, n.tpFwd, none);
  opTimes(p.bwd, b, tp, c, fp32Training, paramBytes, sp, n.bwdCompute, n.gemmBwd, n.tpBwd,
          n.tpBwdBesideGemm);
  const RegionMemory &mem = tp == 1 ? p.memoryAtTp1 : sp ? p.memorySp : p.memory;
  n.savedFull = mem.savedFull.eval(b, tp);
  n.savedCkpt = mem.savedCkpt.eval(b, tp);
  n.savedSelective = mem.savedSelective.eval(b, tp);
  n.fwdPeakFull = maxOf(mem.fwdPeakFull, b, tp);
  n.fwdPeakCkpt = maxOf(mem.fwdPeakCkpt, b, tp);
  n.fwdPeakSelective = maxOf(mem.fwdPeakSelective, b, tp);
  // What selective recomputation runs again before the backward.
  std::vector<OpProfile> again;
  for (const OpProfile &op : p.fwd)
    if (op.selectiveRecompute)
      again.push_back(op);
  double gemm = 0, tpComm = 0, beside = 0;
  opTimes(again, b, tp, c, fp32Training, paramBytes, sp, n.selectiveRecompute, gemm, tpComm,
          beside);
  n.bwdPeak = maxOf(mem.bwdPeak, b, tp);
  n.gradIn = (sp ? p.gradInSp : p.gradIn).eval(b, tp);
  n.output = (sp ? p.outputSp : p.output).eval(b, tp);
  n.fwdFlops = p.fwdFlops.eval(b, tp);
  n.bwdFlops = p.bwdFlops.eval(b, tp);
  return n;
}

std::optional<ModelProfile> ModelProfile::build(const Module &m, DiagnosticEngine &diag) {
  if (!m.state.shaped || !m.state.tpSharded || !m.state.differentiated || !m.state.costed) {
    diag.error({}, "the performance model needs a module after shape-infer, tp-shard, backward "
                   "and cost-model");
    return std::nullopt;
  }
  ModelProfile mp;
  mp.modelName = m.name;
  const double master = dtypeBytes(m.train.masterDtype);
  mp.paramBytes = dtypeBytes(m.train.dtype);
  mp.gradBytes = dtypeBytes(m.train.gradientDtype());
  mp.fp32Training = m.train.dtype == DType::F32;
  mp.mastersAreWeights = m.train.dtype == m.train.masterDtype;
  mp.stateBytes = 2 * master + (m.train.dtype == m.train.masterDtype ? 0 : master);
  auto layers = exprToInt(m.symbols.bindAll(m.layer.repeat));
  const Symbol *seq = m.symbols.ofKind(SymbolKind::Seq);
  if (!layers || *layers <= 0 || *layers > 1000000 || !seq || !seq->value) {
    diag.error({}, "the layer count (at most 1,000,000) and the sequence length must be known");
    return std::nullopt;
  }
  mp.numLayers = static_cast<int>(*layers);
  mp.seqLen = *seq->value;
  mp.globalBatch = m.train.globalBatch;
  for (auto [kind, dst] : {std::pair{RegionKind::Pre, &mp.pre},
                           {RegionKind::Layer, &mp.layer},
                           {RegionKind::Post, &mp.post}}) {
    const Region &r = kind == RegionKind::Pre     ? m.pre
                      : kind == RegionKind::Layer ? m.layer
                                                  : m.post;
    auto p = RegionBuilder(m, r, diag).build();
    if (!p)
      return std::nullopt;
    *dst = std::move(*p);
  }
  for (const Assumption &a : m.assumptions) {
    auto dividend = Poly::compile(a.dividend, m.symbols),
         divisor = Poly::compile(a.divisor, m.symbols);
    if (dividend && divisor)
      mp.assumptions.push_back(
          {printExpr(a.dividend, m.symbols) + " % " + printExpr(a.divisor, m.symbols) + " == 0",
           *dividend, *divisor});
  }
  double fwd = mp.pre.fwdFlops.eval(1, 1) + mp.numLayers * mp.layer.fwdFlops.eval(1, 1) +
               mp.post.fwdFlops.eval(1, 1);
  mp.modelFlopsPerSample = 3 * fwd;
  return mp;
}

std::optional<std::string> ModelProfile::violatedAssumption(int tp) const {
  for (const Divisibility &a : assumptions) {
    double q = a.dividend.eval(1, tp) / a.divisor.eval(1, tp);
    if (std::abs(q - std::round(q)) > 1e-9)
      return a.text;
  }
  return std::nullopt;
}
