//===- TrainerOpCall.cpp - One lowered op as a call to runtime/ops --------===//
#include "backend/trainer/TrainerOpCall.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <optional>

using namespace mist;

namespace {

/// One op's operands, results, attributes and sizes as train.cu writes
/// them: ir/OpCalls.def's vocabulary as text, sizes in the model's symbols.
class OpCallArgs {
public:
  OpCallArgs(const LoweredOp &op, const OpCallNaming &naming)
      : op(op), o0(op.operands.empty() ? -1 : op.operands[0]),
        r0(op.results.empty() ? -1 : op.results[0]), naming(naming) {}

  // Buffers and pointers.
  int operand(size_t k) const { return op.operands.at(k); }
  int result(size_t k) const { return op.results.at(k); }
  std::string in(size_t k) const { return naming.refs.at(size_t(operand(k))); }
  std::string res(size_t k) const { return naming.refs.at(size_t(result(k))); }
  std::string optIn(const char *key, size_t k) const { return flag(key) ? in(k) : "nullptr"; }
  std::string optRes(const char *key, size_t k) const { return flag(key) ? res(k) : "nullptr"; }
  std::string inPick(const char *key, size_t k, size_t j) const { return in(flag(key) ? k : j); }
  /// A row-parallel linear makes partial sums: one tp rank adds the bias.
  std::string rowParallelBias(size_t k) const {
    auto shard = op.words.find("shard");
    bool row = shard != op.words.end() && shard->second == "row";
    return !flag("bias") ? "nullptr"
           : row         ? fmt::format("C.rank() == 0 ? {} : nullptr", in(k))
                         : in(k);
  }

  // Sizes.
  const std::vector<Expr> &dims(int buffer) const { return naming.st.buffers[buffer].dims; }
  Expr dim(int buffer, size_t i) const { return dims(buffer).at(i); }
  Expr last(int buffer) const { return dims(buffer).back(); }
  Expr elements(int buffer) const { return naming.st.buffers[buffer].symbolicElements(); }
  Expr rows(int buffer) const { return elements(buffer) / last(buffer); }
  Expr sizeAttr(const char *key, const Expr &dflt) const {
    auto it = op.sizes.find(key);
    return it == op.sizes.end() ? dflt : it->second;
  }

  // Arguments.
  std::string sz(const Expr &e) const { return naming.sizes.text(e); }
  std::string factor(const Expr &e) const { return naming.sizes.factor(e); }
  std::string n(int buffer) const { return sz(elements(buffer)); }
  std::string tpOffset(const Expr &e) const { return "C.rank() * " + factor(e); }
  std::string firstToken(int buffer) const {
    return flag("sequence_split") ? tpOffset(rows(buffer)) : "0";
  }
  std::string f32(const char *key, double dflt) const {
    return fmt::format("float({})", num(key, dflt));
  }
  bool flag(const char *key, bool dflt = false) const {
    auto it = op.words.find(key);
    return it == op.words.end() ? dflt : it->second == "true";
  }
  std::string namedFlag(const char *argName, const char *key) const {
    return fmt::format("/*{}=*/{}", argName, flag(key) ? "true" : "false");
  }
  double num(const char *key, double dflt) const {
    auto it = op.numbers.find(key);
    return it == op.numbers.end() ? dflt : it->second;
  }

  // Attention: q, k and v apart or fused in one buffer.
  const AttentionGeometryOf<Expr> &geometry() const {
    if (!attention)
      attention = symbolicAttentionGeometry(naming.st, op);
    return *attention;
  }
  std::string attInput(size_t which) const { // 0 q, 1 k, 2 v
    const auto &g = geometry();
    std::string q = in(g.firstInput);
    if (which == 0)
      return q;
    return g.fused ? fmt::format("{} + {}", q, factor(which == 1 ? g.kOffset : g.vOffset))
                   : in(g.firstInput + which);
  }
  std::string attGrad(size_t which) const { // 0 dq, 1 dk, 2 dv
    const auto &g = geometry();
    std::string dq = res(0);
    if (which == 0)
      return dq;
    return g.fused ? fmt::format("{} + {}", dq, factor(which == 1 ? g.kOffset : g.vOffset))
                   : res(which);
  }
  std::string attShape() const {
    const auto &g = geometry();
    return fmt::format("AttentionShape{{{}, {}, {}, {}, {}, {}}}", sz(g.batch), sz(g.seq),
                       sz(g.heads), sz(g.kvHeads), sz(g.headDim),
                       flag("causal") ? "true" : "false");
  }

  /// `fn(args...);`
  static std::string call(const std::string &fn, std::initializer_list<std::string> args) {
    return fmt::format("{}({});", fn, fmt::join(args, ", "));
  }

  const LoweredOp &op;
  const int o0, r0; ///< the first operand and result, -1 when there is none

private:
  const OpCallNaming &naming;
  mutable std::optional<AttentionGeometryOf<Expr>> attention;
};

} // namespace

bool mist::runtimeOpCall(const LoweredOp &op, const OpCallNaming &naming, std::string &out) {
  const OpCallArgs a(op, naming);
  // ir/OpCalls.def's vocabulary as train.cu's text.
#define O(k) a.operand(k)
#define R(k) a.result(k)
#define IN(k) a.in(k)
#define RES(k) a.res(k)
#define IDS(k) a.in(k)
#define OPT_IN(key, k) a.optIn(key, k)
#define OPT_RES(key, k) a.optRes(key, k)
#define IN_PICK(key, k, j) a.inPick(key, k, j)
#define ROW_PARALLEL_BIAS(k) a.rowParallelBias(k)
#define DIM(b, i) a.dim(b, i)
#define LAST(b) a.last(b)
#define ELEMS(b) a.elements(b)
#define ROWS(b) a.rows(b)
#define SIZE_ATTR(key, dflt) a.sizeAttr(key, Expr(dflt))
#define N(size) a.sz(size)
#define TP_OFFSET(size) a.tpOffset(size)
#define FIRST_TOKEN(b) a.firstToken(b)
#define F32(key, dflt) a.f32(key, dflt)
#define FLAG(key, dflt) a.flag(key, dflt)
#define NAMED_FLAG(argName, key) a.namedFlag(#argName, key)
#define ATT_Q a.attInput(0)
#define ATT_K a.attInput(1)
#define ATT_V a.attInput(2)
#define ATT_DQ a.attGrad(0)
#define ATT_DK a.attGrad(1)
#define ATT_DV a.attGrad(2)
#define ATT_OUT a.in(a.geometry().outOperand)
#define ATT_LSE a.in(a.geometry().outOperand + 1)
#define ATT_Q_STRIDE a.geometry().qStride
#define ATT_KV_STRIDE a.geometry().kvStride
#define ATT_SHAPE a.attShape()
#define MIST_OP_CALL(Kind, fn, ...)                                                                \
  if (op.kind == OpKind::Kind) {                                                                   \
    out = OpCallArgs::call(#fn, {__VA_ARGS__});                                                    \
    return true;                                                                                   \
  }
#define MIST_OP_CALL_IF(Kind, cond, fn, ...)                                                       \
  if (op.kind == OpKind::Kind && (cond)) {                                                         \
    out = OpCallArgs::call(#fn, {__VA_ARGS__});                                                    \
    return true;                                                                                   \
  }
#define MIST_TP_CALL(Kind, fn, ...)                                                                \
  if (op.kind == OpKind::Kind) {                                                                   \
    out = OpCallArgs::call("C." #fn, {__VA_ARGS__});                                               \
    return true;                                                                                   \
  }
#include "ir/OpCalls.def"
// The vocabulary ends with the table.
#include "ir/OpCallVocabularyEnd.h"
  return false;
}

bool mist::fusedRuntimeOpCall(const LoweredOp &first, const LoweredOp &second,
                              const OpCallNaming &naming, std::string &out) {
  const OpCallArgs a(first, naming), b(second, naming);
  const bool tanhGelu = b.flag("approximate", true);
  // linear -> gelu: the GELU reads the linear layer's whole output, which is
  // not a partial sum (a row-parallel layer's is; it is all-reduced first).
  if (first.kind == OpKind::Linear && second.kind == OpKind::Gelu && tanhGelu &&
      second.operands[0] == first.results[0]) {
    auto shard = first.words.find("shard");
    if (shard != first.words.end() && shard->second == "row")
      return false;
    const auto &w = a.dims(first.operands[1]);
    out = fmt::format("linearGelu({}, {}, {}, {}, {}, {}, {}, {});", b.res(0), a.res(0), a.in(0),
                      a.in(1), a.flag("bias") ? a.in(2) : "nullptr", a.sz(a.elements(a.o0) / w[0]),
                      a.sz(w[0]), a.sz(w[1]));
    return true;
  }
  // add -> the norm of the sum.
  if (first.kind == OpKind::Add && second.operands[0] == first.results[0] &&
      (second.kind == OpKind::LayerNorm || second.kind == OpKind::RMSNorm)) {
    const Expr &c = b.dims(second.operands[0]).back();
    const std::string rows = b.sz(b.elements(second.operands[0]) / c);
    if (second.kind == OpKind::LayerNorm)
      out = fmt::format("addLayerNorm({}, {}, {}, {}, {}, {}, {}, {}, {}, float({}));", a.res(0),
                        b.res(0), b.res(1), a.in(0), a.in(1), b.in(1),
                        b.flag("bias") ? b.in(2) : "nullptr", rows, b.sz(c), b.num("eps", 1e-5));
    else
      out =
          fmt::format("addRmsNorm({}, {}, {}, {}, {}, {}, {}, {}, float({}));", a.res(0), b.res(0),
                      b.res(1), a.in(0), a.in(1), b.in(1), rows, b.sz(c), b.num("eps", 1e-5));
    return true;
  }
  // linear_grad -> gelu_grad of its input's gradient.
  if (first.kind == OpKind::LinearGrad && second.kind == OpKind::GeluGrad && tanhGelu &&
      second.operands[0] == first.results[0]) {
    const auto &w = a.dims(first.operands[2]);
    out = fmt::format("linearGradGelu({}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {});", b.res(0),
                      a.res(0), a.res(1), a.flag("bias") ? a.res(2) : "nullptr", a.in(0), a.in(1),
                      a.in(2), b.in(1), a.sz(a.elements(first.operands[1]) / w[0]), a.sz(w[0]),
                      a.sz(w[1]));
    return true;
  }
  return false;
}
