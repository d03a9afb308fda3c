//===- TrainerOpCall.cpp - One lowered op as a call to runtime/ops --------===//
#include "backend/trainer/TrainerOpCall.h"

#include <fmt/format.h>
#include <optional>

using namespace mist;

namespace {

/// One op's operands, results, attributes and sizes as train.cu writes them.
class OpCallArgs {
public:
  OpCallArgs(const LoweredOp &op, const OpCallNaming &naming)
      : op(op), o0(op.operands.empty() ? -1 : op.operands[0]),
        r0(op.results.empty() ? -1 : op.results[0]), naming(naming) {}

  std::string in(size_t k) const { return naming.refs.at(size_t(op.operands.at(k))); }
  std::string res(size_t k) const { return naming.refs.at(size_t(op.results.at(k))); }
  bool flag(const char *key, bool dflt = false) const {
    auto it = op.words.find(key);
    return it == op.words.end() ? dflt : it->second == "true";
  }
  double num(const char *key, double dflt) const {
    auto it = op.numbers.find(key);
    return it == op.numbers.end() ? dflt : it->second;
  }
  const std::vector<Expr> &dims(int buffer) const { return naming.st.buffers[buffer].dims; }
  Expr elements(int buffer) const { return naming.st.buffers[buffer].symbolicElements(); }
  std::string sz(const Expr &e) const { return naming.sizes.text(e); }
  std::string factor(const Expr &e) const { return naming.sizes.factor(e); }
  std::string n(int buffer) const { return sz(elements(buffer)); }
  const LoweredStage &stage() const { return naming.st; }

  const LoweredOp &op;
  const int o0, r0; ///< the first operand and result, -1 when there is none

private:
  const OpCallNaming &naming;
};

/// Token and position embeddings and their gradients.
std::optional<std::string> embeddingCall(const OpCallArgs &a) {
  switch (a.op.kind) {
  case OpKind::Embedding: {
    const auto &t = a.dims(a.op.operands[1]);
    return fmt::format("embedding({}, {}, {}, {}, {}, {}, C.rank() * {});", a.res(0), a.in(0),
                       a.in(1), a.n(a.o0), a.sz(t[1]), a.sz(t[0]), a.factor(t[0]));
  }
  case OpKind::EmbeddingGrad: {
    const auto &t = a.dims(a.r0);
    return fmt::format("embeddingGrad({}, {}, {}, {}, {}, {}, C.rank() * {});", a.res(0), a.in(0),
                       a.in(1), a.n(a.op.operands[1]), a.sz(t[1]), a.sz(t[0]), a.factor(t[0]));
  }
  case OpKind::PositionEmbedding: {
    const auto &s = a.dims(a.r0);
    return fmt::format("positionEmbedding({}, {}, {}, {}, {});", a.res(0), a.in(0), a.sz(s[0]),
                       a.sz(s[1]), a.sz(s[2]));
  }
  case OpKind::PositionEmbeddingGrad: {
    const auto &s = a.dims(a.o0);
    return fmt::format("positionEmbeddingGrad({}, {}, {}, {}, {});", a.res(0), a.in(0), a.sz(s[0]),
                       a.sz(s[1]), a.sz(s[2]));
  }
  default:
    return std::nullopt;
  }
}

/// LayerNorm and RMSNorm over the last axis, and their gradients.
std::optional<std::string> normCall(const OpCallArgs &a) {
  switch (a.op.kind) {
  case OpKind::LayerNorm: {
    const Expr &c = a.dims(a.o0).back();
    return fmt::format("layerNorm({}, {}, {}, {}, {}, {}, {}, float({}));", a.res(0), a.res(1),
                       a.in(0), a.in(1), a.flag("bias") ? a.in(2) : "nullptr",
                       a.sz(a.elements(a.o0) / c), a.sz(c), a.num("eps", 1e-5));
  }
  case OpKind::LayerNormGrad: {
    const Expr &c = a.dims(a.o0).back();
    bool b = a.flag("bias");
    return fmt::format("layerNormGrad({}, {}, {}, {}, {}, {}, {}, {}, {});", a.res(0), a.res(1),
                       b ? a.res(2) : "nullptr", a.in(0), a.in(1), a.in(2), a.in(b ? 4 : 3),
                       a.sz(a.elements(a.o0) / c), a.sz(c));
  }
  case OpKind::RMSNorm: {
    const Expr &c = a.dims(a.o0).back();
    return fmt::format("rmsNorm({}, {}, {}, {}, {}, {}, float({}));", a.res(0), a.res(1), a.in(0),
                       a.in(1), a.sz(a.elements(a.o0) / c), a.sz(c), a.num("eps", 1e-5));
  }
  case OpKind::RMSNormGrad: {
    const Expr &c = a.dims(a.o0).back();
    return fmt::format("rmsNormGrad({}, {}, {}, {}, {}, {}, {}, {});", a.res(0), a.res(1), a.in(0),
                       a.in(1), a.in(2), a.in(3), a.sz(a.elements(a.o0) / c), a.sz(c));
  }
  default:
    return std::nullopt;
  }
}

/// The GEMMs: linear layers and the LM head, and their gradients.
std::optional<std::string> linearCall(const OpCallArgs &a) {
  switch (a.op.kind) {
  case OpKind::Linear: {
    const auto &w = a.dims(a.op.operands[1]);
    // A row-parallel linear makes partial sums: one tp rank adds the bias.
    auto shard = a.op.words.find("shard");
    bool row = shard != a.op.words.end() && shard->second == "row";
    std::string bias = !a.flag("bias") ? "nullptr"
                       : row           ? fmt::format("C.rank() == 0 ? {} : nullptr", a.in(2))
                                       : a.in(2);
    return fmt::format("linear({}, {}, {}, {}, {}, {}, {});", a.res(0), a.in(0), a.in(1), bias,
                       a.sz(a.elements(a.o0) / w[0]), a.sz(w[0]), a.sz(w[1]));
  }
  case OpKind::LinearGrad: {
    const auto &w = a.dims(a.op.operands[2]);
    return fmt::format("linearGrad({}, {}, {}, {}, {}, {}, {}, {}, {});", a.res(0), a.res(1),
                       a.flag("bias") ? a.res(2) : "nullptr", a.in(0), a.in(1), a.in(2),
                       a.sz(a.elements(a.op.operands[1]) / w[0]), a.sz(w[0]), a.sz(w[1]));
  }
  case OpKind::LMHead: {
    const auto &t = a.dims(a.op.operands[1]);
    return fmt::format("lmHead({}, {}, {}, {}, {}, {});", a.res(0), a.in(0), a.in(1),
                       a.sz(a.elements(a.o0) / t[1]), a.sz(t[1]), a.sz(t[0]));
  }
  case OpKind::LMHeadGrad: {
    const auto &t = a.dims(a.op.operands[2]);
    return fmt::format("lmHeadGrad({}, {}, {}, {}, {}, {}, {}, {});", a.res(0), a.res(1), a.in(0),
                       a.in(1), a.in(2), a.sz(a.elements(a.op.operands[1]) / t[1]), a.sz(t[1]),
                       a.sz(t[0]));
  }
  default:
    return std::nullopt;
  }
}

/// Attention (q, k and v apart or fused in one buffer) and its gradient.
std::string attentionCall(const OpCallArgs &a) {
  AttentionGeometryOf<Expr> g = symbolicAttentionGeometry(a.stage(), a.op);
  std::string q = a.in(g.firstInput);
  auto at = [&](const std::string &base, const Expr &offset) {
    return fmt::format("{} + {}", base, a.factor(offset));
  };
  std::string k = g.fused ? at(q, g.kOffset) : a.in(g.firstInput + 1);
  std::string v = g.fused ? at(q, g.vOffset) : a.in(g.firstInput + 2);
  std::string shapeArg = fmt::format("AttentionShape{{{}, {}, {}, {}, {}, {}}}", a.sz(g.batch),
                                     a.sz(g.seq), a.sz(g.heads), a.sz(g.kvHeads), a.sz(g.headDim),
                                     a.flag("causal") ? "true" : "false");
  if (a.op.kind == OpKind::Attention)
    return fmt::format("attention({}, {}, {}, {}, {}, {}, {}, {});", a.res(0), a.res(1), q, k, v,
                       a.sz(g.qStride), a.sz(g.kvStride), shapeArg);
  std::string dq = a.res(0), dk = g.fused ? at(dq, g.kOffset) : a.res(1),
              dv = g.fused ? at(dq, g.vOffset) : a.res(2);
  return fmt::format("attentionGrad({}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {});", dq, dk, dv,
                     a.in(0), q, k, v, a.in(g.outOperand), a.in(g.outOperand + 1), a.sz(g.qStride),
                     a.sz(g.kvStride), shapeArg);
}

/// Attention and the rotary embedding of its queries and keys.
std::optional<std::string> attentionFamilyCall(const OpCallArgs &a) {
  switch (a.op.kind) {
  case OpKind::Attention:
  case OpKind::AttentionGrad:
    return attentionCall(a);
  case OpKind::Rope:
  case OpKind::RopeGrad: {
    const auto &s = a.dims(a.o0);
    auto hdAttr = a.op.sizes.find("head_dim");
    const Expr hd = hdAttr == a.op.sizes.end() ? Expr(1) : hdAttr->second;
    auto rotaryAttr = a.op.sizes.find("rotary_dim");
    const Expr rotary = rotaryAttr == a.op.sizes.end() ? hd : rotaryAttr->second;
    return fmt::format("{}({}, {}, {}, {}, {}, {}, float({}), {});",
                       a.op.kind == OpKind::Rope ? "rope" : "ropeGrad", a.res(0), a.in(0),
                       a.sz(s[0]), a.sz(s[1]), a.sz(s[2] / hd), a.sz(hd), a.num("theta", 10000.0),
                       a.sz(rotary));
  }
  default:
    return std::nullopt;
  }
}

/// The ops over n elements: sums, copies, the tp all-reduce, activations
/// and products.
std::optional<std::string> elementwiseCall(const OpCallArgs &a) {
  switch (a.op.kind) {
  case OpKind::Add:
  case OpKind::GradAdd:
    return fmt::format("add({}, {}, {}, {});", a.res(0), a.in(0), a.in(1), a.n(a.r0));
  case OpKind::AllReduce: // the partial sums of the tp group
    return fmt::format("C.allReduce({}, {}, {});", a.res(0), a.in(0), a.n(a.r0));
  case OpKind::TpCopy:  // the identity forward (its gradient has its own all_reduce)
  case OpKind::Dropout: // p = 0 (checked before emitting)
  case OpKind::DropoutGrad:
    return fmt::format("copy({}, {}, {});", a.res(0), a.in(0), a.n(a.r0));
  case OpKind::Gelu: // the tanh form unless the model asked for the exact one
    return fmt::format("{}({}, {}, {});", a.flag("approximate", true) ? "gelu" : "geluExact",
                       a.res(0), a.in(0), a.n(a.r0));
  case OpKind::GeluGrad:
    return fmt::format("{}({}, {}, {}, {});",
                       a.flag("approximate", true) ? "geluGrad" : "geluExactGrad", a.res(0),
                       a.in(0), a.in(1), a.n(a.r0));
  case OpKind::Silu:
    return fmt::format("silu({}, {}, {});", a.res(0), a.in(0), a.n(a.r0));
  case OpKind::SiluGrad:
    return fmt::format("siluGrad({}, {}, {}, {});", a.res(0), a.in(0), a.in(1), a.n(a.r0));
  case OpKind::Mul:
    return fmt::format("mul({}, {}, {}, {});", a.res(0), a.in(0), a.in(1), a.n(a.r0));
  case OpKind::MulGrad:
    return fmt::format("mulGrad({}, {}, {}, {}, {}, {});", a.res(0), a.res(1), a.in(0), a.in(1),
                       a.in(2), a.n(a.r0));
  default:
    return std::nullopt;
  }
}

/// slice and concat along the last axis (and their gradients): strided
/// copies of rows. A slice of an axis split over tp takes this rank's part:
/// its start scales as its size does (size / tp of the full size).
std::optional<std::string> layoutCall(const OpCallArgs &a) {
  const LoweredOp &op = a.op;
  auto last = [&](int buffer) { return a.dims(buffer).back(); };
  auto rows = [&](int buffer) { return a.sz(a.elements(buffer) / last(buffer)); };
  switch (op.kind) {
  case OpKind::Slice:
  case OpKind::SliceGrad: {
    const bool grad = op.kind == OpKind::SliceGrad;
    const int x = grad ? a.r0 : a.o0, part = grad ? a.o0 : a.r0;
    const Expr start = op.sizes.at("start") * last(part) / op.sizes.at("size");
    return fmt::format("{}({}, {}, {}, {}, {}, {});", grad ? "sliceLastGrad" : "sliceLast",
                       a.res(0), a.in(0), rows(x), a.sz(last(x)), a.sz(start), a.sz(last(part)));
  }
  case OpKind::Concat:
    return fmt::format("concatLast({}, {}, {}, {}, {}, {});", a.res(0), a.in(0), a.in(1),
                       rows(a.r0), a.sz(last(op.operands[0])), a.sz(last(op.operands[1])));
  case OpKind::ConcatGrad:
    return fmt::format("concatLastGrad({}, {}, {}, {}, {}, {});", a.res(0), a.res(1), a.in(0),
                       rows(a.o0), a.sz(last(op.results[0])), a.sz(last(op.results[1])));
  default:
    return std::nullopt;
  }
}

/// The loss over the (possibly vocab-parallel) logits, and its gradient.
std::optional<std::string> crossEntropyCall(const OpCallArgs &a) {
  const char *vocabParallel =
      a.flag("vocab_parallel") ? "/*vocabParallel=*/true" : "/*vocabParallel=*/false";
  switch (a.op.kind) {
  case OpKind::CrossEntropy: {
    const Expr &vocab = a.dims(a.o0).back();
    return fmt::format("C.crossEntropy({}, {}, {}, {}, {}, {}, {});", a.res(0), a.res(1), a.in(0),
                       a.in(1), a.sz(a.elements(a.o0) / vocab), a.sz(vocab), vocabParallel);
  }
  case OpKind::CrossEntropyGrad: {
    const Expr &vocab = a.dims(a.op.operands[1]).back();
    return fmt::format("C.crossEntropyGrad({}, {}, {}, {}, {}, {}, {}, {});", a.res(0), a.in(0),
                       a.in(1), a.in(2), a.in(3), a.sz(a.elements(a.op.operands[1]) / vocab),
                       a.sz(vocab), vocabParallel);
  }
  default:
    return std::nullopt;
  }
}

} // namespace

bool mist::runtimeOpCall(const LoweredOp &op, const OpCallNaming &naming, std::string &out) {
  const OpCallArgs args(op, naming);
  // Each family answers for its own ops only.
  for (auto family : {embeddingCall, normCall, linearCall, attentionFamilyCall, elementwiseCall,
                      layoutCall, crossEntropyCall})
    if (std::optional<std::string> call = family(args)) {
      out = std::move(*call);
      return true;
    }
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
