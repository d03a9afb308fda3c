//===- Lowering.cpp - The IR at one stage shape, with concrete sizes ------===//
#include "backend/trainer/Lowering.h"

#include "ir/OpSemantics.h"
#include "ir/Printer.h"
#include <fmt/format.h>
#include <numeric>
#include <set>

using namespace mist;

int64_t LoweredBuffer::elements() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t(1), std::multiplies<int64_t>());
}

std::vector<std::pair<int64_t, int64_t>> ParamLayout::rangesOf(int rank, int tp) const {
  if (shardAxis < 0)
    return {{0, fullShape.empty() ? 1 : fullShape[0]}};
  std::vector<std::pair<int64_t, int64_t>> ranges;
  int64_t offset = 0;
  for (int64_t g : groups) {
    int64_t part = g / tp;
    ranges.push_back({offset + rank * part, offset + (rank + 1) * part});
    offset += g;
  }
  return ranges;
}

Expr LoweredBuffer::symbolicElements() const {
  Expr n = 1;
  for (const Expr &d : dims)
    n *= d;
  return n;
}

namespace {

/// attentionGeometry over sizes of type Size: `shapeOf(buffer)` gives a
/// buffer's shape, `headDim` the op's head_dim attribute (1 when absent).
template <class Size, class ShapeOf>
AttentionGeometryOf<Size> geometry(const LoweredOp &op, ShapeOf shapeOf, Size headDim) {
  AttentionGeometryOf<Size> g;
  const bool grad = op.kind == OpKind::AttentionGrad;
  g.firstInput = grad ? 1 : 0;
  g.fused = op.operands.size() == (grad ? 4u : 1u);
  g.outOperand = grad ? (g.fused ? 2 : 4) : 0;
  g.headDim = headDim;
  const std::vector<Size> &out = shapeOf(grad ? op.operands[g.outOperand] : op.results[0]);
  g.batch = out[0];
  g.seq = out[1];
  g.heads = out[2] / g.headDim;
  if (g.fused) {
    Size width = shapeOf(op.operands[g.firstInput])[2];
    g.kvHeads = (width - g.heads * g.headDim) / (2 * g.headDim);
    g.qStride = g.kvStride = width;
    g.kOffset = g.heads * g.headDim;
    g.vOffset = (g.heads + g.kvHeads) * g.headDim;
  } else {
    g.kvHeads = shapeOf(op.operands[g.firstInput + 1])[2] / g.headDim;
    g.qStride = g.heads * g.headDim;
    g.kvStride = g.kvHeads * g.headDim;
  }
  return g;
}

} // namespace

AttentionGeometry mist::attentionGeometry(const LoweredStage &st, const LoweredOp &op) {
  auto hd = op.numbers.find("head_dim");
  return geometry<int64_t>(
      op, [&](int b) -> const std::vector<int64_t> & { return st.buffers[b].shape; },
      hd == op.numbers.end() ? 1 : static_cast<int64_t>(hd->second));
}

AttentionGeometryOf<Expr> mist::symbolicAttentionGeometry(const LoweredStage &st,
                                                          const LoweredOp &op) {
  auto hd = op.sizes.find("head_dim");
  AttentionGeometryOf<Expr> g = geometry<Expr>(
      op, [&](int b) -> const std::vector<Expr> & { return st.buffers[b].dims; },
      hd == op.sizes.end() ? Expr(1) : hd->second);
  for (Expr *e : {&g.batch, &g.seq, &g.heads, &g.kvHeads, &g.headDim, &g.qStride, &g.kvStride,
                  &g.kOffset, &g.vOffset})
    *e = e->normal();
  return g;
}

const ParamLayout *LoweredStage::param(const std::string &name) const {
  for (const ParamLayout &p : params)
    if (p.name == name)
      return &p;
  return nullptr;
}

namespace {

class Lowerer {
public:
  Lowerer(const Module &m, int b, int tp, DiagnosticEngine &diag) : m(m), diag(diag) {
    out.microBatch = b;
    out.tp = tp;
  }

  std::optional<LoweredStage> run() {
    if (!m.state.shaped || !m.state.tpSharded || !m.state.differentiated) {
      diag.error({}, "lowering needs a module after shape-infer, tp-shard and backward");
      return std::nullopt;
    }
    for (const auto &v : m.inputs)
      if (auto i = buffer(v.get()))
        out.moduleInputs.push_back(*i);
      else
        return std::nullopt;
    for (const Region *r : m.regions)
      if (!lowerRegion(*r))
        return std::nullopt;
    return std::move(out);
  }

private:
  /// `e` at the stage's b and the given tp.
  std::optional<int64_t> eval(const Expr &e, int tp) const {
    GiNaC::exmap at;
    if (const Symbol *b = m.symbols.ofKind(SymbolKind::Batch))
      at[b->sym] = out.microBatch;
    if (const Symbol *t = m.symbols.ofKind(SymbolKind::TP))
      at[t->sym] = tp;
    return exprToInt(m.symbols.bindAll(e, at));
  }

  std::optional<std::vector<int64_t>> shapeAt(const Value *v, int tp) {
    std::vector<int64_t> shape;
    for (const Expr &d : v->type.shape) {
      auto n = eval(d, tp);
      if (!n || *n <= 0) {
        diag.error(v->def ? v->def->loc : llvm::SMLoc(),
                   fmt::format(
                       "lowering: a size of '%{}' is not a positive integer at b = {}, tp = {}: {}",
                       v->name, out.microBatch, tp, printExpr(d, m.symbols)));
        return std::nullopt;
      }
      shape.push_back(*n);
    }
    return shape;
  }

  std::optional<int> buffer(const Value *v) {
    if (auto it = index.find(v); it != index.end())
      return it->second;
    auto shape = shapeAt(v, out.tp);
    if (!shape)
      return std::nullopt;
    // Weight gradients are accumulated and reduced in the plan's grad_dtype
    // (fp32 for bf16 training unless the model says otherwise), which the
    // IR's `grad` values leave to the train section.
    const DType dtype = v->type.role == Role::Grad ? m.train.gradientDtype() : v->type.dtype;
    out.buffers.push_back({v->name, dtype, v->type.role, *shape, v->type.shape, v->type.partial});
    return index[v] = static_cast<int>(out.buffers.size() - 1);
  }

  /// The parts a column-parallel linear's parameter is laid out in along its
  /// output axis (`width` wide), each split evenly over tp, when the
  /// linear's output is read part by part: cut at the three parts of a fused
  /// q/k/v that attention reads, and at the boundaries of every slice of it
  /// (lang/SPEC.md, slice). nullopt: one part, the whole axis.
  std::optional<std::vector<int64_t>> partGroups(const Value *param, int64_t width) {
    std::set<int64_t> cuts = {0, width};
    bool parted = false;
    for (const Region *r : m.regions)
      for (const auto &op : r->fwd.ops) {
        if (op->kind != OpKind::Linear ||
            std::find(op->operands.begin() + 1, op->operands.end(), param) == op->operands.end())
          continue;
        for (const Region *r2 : m.regions)
          for (const auto &use : r2->fwd.ops) {
            if (use->operands.empty() || use->operands[0] != op->result())
              continue;
            // A size attribute's value, or -1 when it has none.
            auto value = [&](const char *attr) -> int64_t {
              auto d = use->dimAttr(attr);
              auto v = d ? eval(*d, 1) : std::nullopt;
              return v ? *v : -1;
            };
            if (use->kind == OpKind::Attention && use->operands.size() == 1) {
              const int64_t h = value("heads"), k = value("kv_heads"), d = value("head_dim");
              if (h < 0 || k < 0 || d < 0)
                return std::nullopt;
              cuts.insert({h * d, (h + k) * d});
              parted = true;
            } else if (use->kind == OpKind::Slice) {
              const int64_t start = value("start"), size = value("size");
              if (start < 0 || size < 0)
                return std::nullopt;
              cuts.insert({start, start + size});
              parted = true;
            }
          }
      }
    if (!parted)
      return std::nullopt;
    std::vector<int64_t> groups;
    for (auto it = std::next(cuts.begin()); it != cuts.end(); ++it)
      groups.push_back(*it - *std::prev(it));
    return groups;
  }

  bool addParam(const Value *v) {
    if (std::any_of(out.params.begin(), out.params.end(),
                    [&](const ParamLayout &p) { return p.name == v->name; }))
      return true;
    ParamLayout p;
    p.name = v->name;
    auto full = shapeAt(v, 1);
    if (!full)
      return false;
    p.fullShape = *full;
    p.shardAxis = v->type.shardAxis;
    if (p.shardAxis >= 0) {
      int64_t size = p.fullShape[p.shardAxis];
      auto groups = partGroups(v, size);
      p.groups = groups ? *groups : std::vector<int64_t>{size};
      int64_t sum = 0, local = 0;
      for (int64_t g : p.groups) {
        sum += g;
        local += g / out.tp;
        if (g % out.tp) {
          diag.error(
              v->def ? v->def->loc : llvm::SMLoc(),
              fmt::format(
                  "lowering: '%{}' has a part of {} along axis {} that tp = {} does not divide",
                  v->name, g, p.shardAxis, out.tp));
          return false;
        }
      }
      const LoweredBuffer &b = out.buffers[index.at(v)];
      if (sum != size || local != b.shape[p.shardAxis]) {
        diag.error(
            v->def ? v->def->loc : llvm::SMLoc(),
            fmt::format("lowering: the shards of '%{}' do not add up ({} of {} along axis {})",
                        v->name, local, size, p.shardAxis));
        return false;
      }
    }
    out.params.push_back(std::move(p));
    return true;
  }

  bool lowerBlock(const Block &block, std::vector<LoweredOp> &ops, std::vector<int> &args,
                  std::vector<int> &yields) {
    for (const auto &a : block.args) {
      auto i = buffer(a.get());
      if (!i)
        return false;
      args.push_back(*i);
    }
    for (const auto &op : block.ops) {
      if (op->kind == OpKind::Param) {
        if (!buffer(op->result()) || !addParam(op->result()))
          return false;
        continue;
      }
      if (forwardsOperand(*op, out.tp == 1)) {
        // The result is the operand unchanged: it names the operand's
        // buffer, and nothing runs (no copy, no second buffer).
        auto i = buffer(op->operands[0]);
        if (!i)
          return false;
        index[op->result()] = *i;
        continue;
      }
      LoweredOp lo;
      lo.kind = op->kind;
      for (const Value *v : op->operands) {
        auto i = buffer(v);
        if (!i)
          return false;
        lo.operands.push_back(*i);
      }
      for (const auto &r : op->results) {
        auto i = buffer(r.get());
        if (!i)
          return false;
        lo.results.push_back(*i);
      }
      for (const auto &[name, attr] : op->attrs) {
        if (const Expr *e = std::get_if<Expr>(&attr)) {
          auto n = eval(*e, out.tp);
          if (!n) {
            diag.error(
                op->loc,
                fmt::format("lowering: attribute '{}' does not evaluate to an integer", name));
            return false;
          }
          lo.numbers[name] = static_cast<double>(*n);
          lo.sizes[name] = *e;
        } else if (const double *d = std::get_if<double>(&attr)) {
          lo.numbers[name] = *d;
        } else if (const bool *f = std::get_if<bool>(&attr)) {
          lo.words[name] = *f ? "true" : "false";
        } else {
          lo.words[name] = std::get<EnumWord>(attr).word;
        }
      }
      ops.push_back(std::move(lo));
    }
    for (const Value *v : block.yields) {
      auto i = buffer(v);
      if (!i)
        return false;
      yields.push_back(*i);
    }
    return true;
  }

  bool lowerRegion(const Region &r) {
    LoweredRegion &lr = out.regions[static_cast<int>(r.kind)];
    lr.kind = r.kind;
    if (!lowerBlock(r.fwd, lr.forward, lr.inputs, lr.outputs))
      return false;
    return !r.bwd || lowerBlock(*r.bwd, lr.backward, lr.gradInputs, lr.gradOutputs);
  }

  const Module &m;
  DiagnosticEngine &diag;
  LoweredStage out;
  std::map<const Value *, int> index;
};

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s;
  for (int64_t d : shape)
    s += (s.empty() ? "" : "x") + std::to_string(d);
  return s.empty() ? "scalar" : s;
}

} // namespace

std::optional<LoweredStage> mist::lowerForStage(const Module &m, int microBatch, int tp,
                                                DiagnosticEngine &diag) {
  return Lowerer(m, microBatch, tp, diag).run();
}

void mist::printLowered(const LoweredStage &st, llvm::raw_ostream &os) {
  int64_t params = 0, floats = 0;
  for (const LoweredBuffer &b : st.buffers) {
    floats += b.elements();
    if (b.role == Role::Param)
      params += b.elements();
  }
  os << fmt::format("lowered at b = {}, tp = {}: {} buffers, {} elements, {} of them parameters\n",
                    st.microBatch, st.tp, st.buffers.size(), floats, params);
  os << "parameters (full shape; what tp rank 0 holds along the shard axis):\n";
  for (const ParamLayout &p : st.params) {
    std::string held = "all";
    if (p.shardAxis >= 0) {
      held = fmt::format("axis {}:", p.shardAxis);
      for (auto [b, e] : p.rangesOf(0, st.tp))
        held += fmt::format(" [{}, {})", b, e);
    }
    os << fmt::format("  {:<32} {:<12} {}\n", p.name, shapeText(p.fullShape), held);
  }
  auto ref = [&](int i) {
    const LoweredBuffer &b = st.buffers[i];
    return fmt::format("%{}[{}]", b.name, shapeText(b.shape));
  };
  auto list = [&](const std::vector<int> &ids) {
    std::string s;
    for (int i : ids)
      s += (s.empty() ? "" : ", ") + ref(i);
    return s;
  };
  for (const LoweredRegion &r : st.regions) {
    os << fmt::format("{} ({}) -> ({})\n", regionName(r.kind), list(r.inputs), list(r.outputs));
    for (const std::vector<LoweredOp> *ops : {&r.forward, &r.backward}) {
      if (ops == &r.backward)
        os << fmt::format("  backward ({}) -> ({})\n", list(r.gradInputs), list(r.gradOutputs));
      for (const LoweredOp &op : *ops) {
        std::string attrs;
        for (const auto &[k, v] : op.numbers)
          attrs += fmt::format("{}{} = {:g}", attrs.empty() ? "" : ", ", k, v);
        for (const auto &[k, v] : op.words)
          attrs += fmt::format("{}{} = {}", attrs.empty() ? "" : ", ", k, v);
        os << fmt::format("    {} = {}({}){}\n", list(op.results), opName(op.kind),
                          list(op.operands), attrs.empty() ? "" : " {" + attrs + "}");
      }
    }
  }
}
