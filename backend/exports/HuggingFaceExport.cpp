//===- HuggingFaceExport.cpp - A trainer checkpoint as a transformers model ===//
#include "backend/exports/HuggingFaceExport.h"

#include "backend/exports/ExportProjection.h"
#include "backend/trainer/Lowering.h"
#include "ir/OpSemantics.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/checkpoint/TensorHash.h"
#include "runtime/device/DType.h"
#include "support/OutputFile.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"
#include <array>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>

using namespace mist;

namespace {

enum class Family { Gpt2, Llama, GptNeox };

const char *className(Family f) {
  return f == Family::Gpt2    ? "GPT2LMHeadModel"
         : f == Family::Llama ? "LlamaForCausalLM"
                              : "GPTNeoXForCausalLM";
}

/// How a transformers tensor is made from the checkpoint's.
enum class Transform {
  Copy,
  Transpose,           ///< [in, out] -> [out, in]
  TransposeRotaryRows, ///< transposed, each head's rows from interleaved pairs to halves
  /// GPT-NeoX's query_key_value: the q, k and v tensors (`parts`) fused per
  /// head (q_h, k_h, v_h, ...), weights transposed, the first `rotaryDim`
  /// rows of each head's q and k from interleaved pairs to halves.
  FuseQkvPerHead
};

/// One tensor of the transformers model.
struct HfTensor {
  std::string hfName;  ///< `{}` stands for the layer index
  std::string ourName; ///< the checkpoint's, `{}` for the layer index
  bool perLayer = false;
  Transform transform = Transform::Copy;
  int64_t heads = 0;                ///< rows' heads, for TransposeRotaryRows and FuseQkvPerHead
  int64_t rotaryDim = 0;            ///< FuseQkvPerHead: the rotating dims of each head
  std::vector<std::string> parts{}; ///< FuseQkvPerHead: q, k and v (checkpoint names)
};

/// What the model's layer computes, op by op.
struct LayerRoles {
  const Op *norm1 = nullptr, *norm2 = nullptr, *attention = nullptr;
  const Op *qkv = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *out = nullptr;
  const Op *ropeQ = nullptr, *ropeK = nullptr;
  const Op *mlpIn = nullptr, *up = nullptr, *activation = nullptr, *gating = nullptr,
           *down = nullptr;
};

bool isInferenceIdentity(OpKind k) {
  return k == OpKind::TpCopy || k == OpKind::AllReduce || k == OpKind::Dropout;
}

/// The op that made `v`, looking through tp copies, all-reduces and dropout
/// (identities at inference).
const Op *source(const Value *v) {
  while (v && v->def && isInferenceIdentity(v->def->kind) && !v->def->operands.empty())
    v = v->def->operands[0];
  return v ? v->def : nullptr;
}

/// The parameter `op` reads as operand `i`, or "".
std::string paramOperand(const Op *op, size_t i) {
  if (!op || i >= op->operands.size())
    return "";
  const Value *v = op->operands[i];
  return v->def && v->def->kind == OpKind::Param ? v->name : "";
}

/// A parameter's name in trainer checkpoints (runtime/trainer/Checkpointing.cpp).
std::string checkpointName(const std::string &param, bool inLayer) {
  if (!inLayer)
    return param;
  return "layers.{}." + (param.rfind("layer.", 0) == 0 ? param.substr(6) : param);
}

class Matcher {
public:
  Matcher(const Module &m, DiagnosticEngine &diag) : m(m), diag(diag) {}

  /// The roles of the layer's ops; nullopt after reporting the op that fits none.
  std::optional<LayerRoles> matchLayer();
  /// The transformers model, or nullopt after reporting why there is none.
  std::optional<std::vector<HfTensor>> tensors(const LayerRoles &r, Family &family);

  double normEps = 1e-5, ropeTheta = 10000;
  bool exactGelu = false; ///< the MLP computes x Phi(x) ("gelu"), else tanh ("gelu_new")
  bool tiedHead = false;
  int64_t rotaryDim = 0, headDim = 0; ///< GPT-NeoX: rotary_pct = rotaryDim / headDim

private:
  bool refuse(const Op *op, const std::string &why) {
    diag.error(op ? op->loc : m.loc,
               fmt::format("--emit=hf: {}{}",
                           op ? fmt::format("'{}' ", opName(op->kind).str()) : "", why));
    return false;
  }
  const Op *single(const std::vector<const Op *> &ops, OpKind kind, const char *role) {
    const Op *found = nullptr;
    for (const Op *op : ops)
      if (op->kind == kind) {
        if (found) {
          refuse(op, fmt::format("a second {} in the layer: transformers' GPT-2, Llama and "
                                 "GPT-NeoX layers have one",
                                 role));
          return nullptr;
        }
        found = op;
      }
    if (!found)
      refuse(nullptr, fmt::format("the layer has no {}: it is neither GPT-2's nor Llama's", role));
    return found;
  }
  std::optional<std::vector<HfTensor>> gpt2(const LayerRoles &r);
  std::optional<std::vector<HfTensor>> llama(const LayerRoles &r);
  std::optional<std::vector<HfTensor>> gptNeox(const LayerRoles &r);
  /// Whether the MLP's norm reads the layer's input (the parallel residual
  /// of GPT-NeoX) rather than the sum after attention (GPT-2, Llama).
  static bool parallelResidual(const LayerRoles &r) {
    return r.norm1->operands[0] == r.norm2->operands[0];
  }
  std::optional<int64_t> ropeSize(const Op *rope, const char *attr) const {
    auto d = rope->dimAttr(attr);
    return d ? exprToInt(m.symbols.bindAll(*d)) : std::nullopt;
  }
  /// pre's token table and (GPT-2) position table, post's norm and head.
  bool endTensors(Family family, std::vector<HfTensor> &out);

  const Module &m;
  DiagnosticEngine &diag;
};

std::optional<LayerRoles> Matcher::matchLayer() {
  std::vector<const Op *> ops, norms, linears;
  for (const auto &op : m.layer.fwd.ops) {
    const Op *o = op.get();
    ops.push_back(o);
    switch (o->kind) {
    case OpKind::LayerNorm:
    case OpKind::RMSNorm:
      norms.push_back(o);
      break;
    case OpKind::Linear:
      linears.push_back(o);
      break;
    case OpKind::Param:
    case OpKind::Add:
    case OpKind::TpCopy:
    case OpKind::AllReduce:
    case OpKind::Dropout:
    case OpKind::Attention:
    case OpKind::Rope:
    case OpKind::Gelu:
    case OpKind::Silu:
    case OpKind::Mul:
      break;
    default:
      refuse(o, "in a layer has no counterpart in transformers' GPT-2, Llama or GPT-NeoX layers");
      return std::nullopt;
    }
  }
  LayerRoles r;
  if (norms.size() != 2) {
    refuse(norms.size() > 2 ? norms[2] : nullptr,
           fmt::format("the layer has {} norm{}; GPT-2, Llama and GPT-NeoX layers have two (before "
                       "attention, before the MLP)",
                       norms.size(), norms.size() == 1 ? "" : "s"));
    return std::nullopt;
  }
  r.norm1 = norms[0];
  r.norm2 = norms[1];
  if (!(r.attention = single(ops, OpKind::Attention, "attention")))
    return std::nullopt;
  // q, k and v: linears of the first norm, through rope for q and k.
  auto projection = [&](const Value *v, const Op *&rope) -> const Op * {
    const Op *s = source(v);
    if (s && s->kind == OpKind::Rope) {
      rope = s;
      s = source(s->operands[0]);
    }
    if (!s || s->kind != OpKind::Linear || source(s->operands[0]) != r.norm1) {
      refuse(s ? s : r.attention, "feeds attention but is not a linear of the layer's first "
                                  "norm, as transformers' GPT-2, Llama and GPT-NeoX attention are");
      return nullptr;
    }
    return s;
  };
  const auto &in = r.attention->operands;
  const Op *noRope = nullptr;
  if (in.size() == 1) {
    if (!(r.qkv = projection(in[0], noRope)))
      return std::nullopt;
  } else if (!(r.q = projection(in[0], r.ropeQ)) || !(r.k = projection(in[1], r.ropeK)) ||
             !(r.v = projection(in[2], noRope))) {
    return std::nullopt;
  }
  if (noRope)
    return refuse(noRope, "on the values (or a fused q/k/v) has no transformers counterpart"),
           std::nullopt;
  // The rest: the output projection, the MLP's linears around its activation.
  for (const Op *l : linears) {
    const Op *from = source(l->operands[0]);
    if (l == r.qkv || l == r.q || l == r.k || l == r.v)
      continue;
    if (from == r.attention && !r.out)
      r.out = l;
    else if (from == r.norm2 && !r.mlpIn)
      r.mlpIn = l;
    else if (from == r.norm2 && !r.up)
      r.up = l;
    else if (from && (from->kind == OpKind::Gelu || from->kind == OpKind::Mul) && !r.down)
      r.down = l;
    else
      return refuse(l,
                    "has no place in transformers' GPT-2, Llama or GPT-NeoX layer (it is not the "
                    "attention output, the MLP's first linears or its last)"),
             std::nullopt;
  }
  if (!r.out || !r.mlpIn || !r.down)
    return refuse(!r.out ? r.attention : r.norm2,
                  "is not followed by the linears of GPT-2's, Llama's or GPT-NeoX's layer"),
           std::nullopt;
  r.activation = source(r.down->operands[0]);
  if (r.activation->kind == OpKind::Mul) { // SwiGLU: silu(gate) * up
    r.gating = r.activation;
    const Op *a = source(r.gating->operands[0]), *b = source(r.gating->operands[1]);
    if (a && a->kind != OpKind::Silu)
      std::swap(a, b);
    if (!a || a->kind != OpKind::Silu || !r.up)
      return refuse(r.gating, "is not silu(gate) * up, Llama's MLP"), std::nullopt;
    r.activation = a;
    const Op *gate = source(a->operands[0]);
    if (gate == r.up)
      std::swap(r.mlpIn, r.up);
    if (source(a->operands[0]) != r.mlpIn || b != r.up)
      return refuse(r.gating, "is not silu(gate) * up of the two linears of the second norm"),
             std::nullopt;
  } else if (source(r.activation->operands[0]) != r.mlpIn || r.up) {
    return refuse(r.activation, "is not GPT-2's MLP (linear, gelu, linear)"), std::nullopt;
  }
  return r;
}

std::optional<std::vector<HfTensor>> Matcher::tensors(const LayerRoles &r, Family &family) {
  // LayerNorm: GPT-2 with one fused q/k/v linear, GPT-NeoX with three.
  family = r.norm1->kind == OpKind::RMSNorm ? Family::Llama
           : r.qkv                          ? Family::Gpt2
                                            : Family::GptNeox;
  normEps = r.norm1->realAttr("eps").value_or(1e-5);
  if (family != Family::GptNeox && parallelResidual(r))
    return refuse(r.norm2, "reads the layer's input beside attention's norm (a parallel "
                           "residual): GPT-2's and Llama's MLP norm reads the sum after attention"),
           std::nullopt;
  auto found = family == Family::Gpt2 ? gpt2(r) : family == Family::Llama ? llama(r) : gptNeox(r);
  if (!found || !endTensors(family, *found))
    return std::nullopt;
  return found;
}

std::optional<std::vector<HfTensor>> Matcher::gpt2(const LayerRoles &r) {
  if (!r.qkv)
    return refuse(r.q, "projects q alone: GPT-2 projects q, k and v with one fused linear (a "
                       "model with LayerNorm exports as GPT-2)"),
           std::nullopt;
  if (r.activation->kind != OpKind::Gelu)
    return refuse(r.activation, "in the MLP: GPT-2's is gelu"), std::nullopt;
  exactGelu = geluIsExact(*r.activation);
  if (r.norm2->kind != OpKind::LayerNorm)
    return refuse(r.norm2, "with a LayerNorm before attention: GPT-2 has two LayerNorms"),
           std::nullopt;
  std::vector<HfTensor> t;
  auto add = [&](const char *hf, const Op *op, size_t operand, const char *what) {
    std::string p = paramOperand(op, operand);
    if (p.empty())
      return refuse(op, fmt::format("without {}: GPT-2 has one", what));
    t.push_back({fmt::format("transformer.h.{{}}.{}", hf), checkpointName(p, true), true});
    return true;
  };
  // GPT-2's Conv1D keeps weights [in, out], as mistc does: copied as they are.
  if (!add("ln_1.weight", r.norm1, 1, "a weight") || !add("ln_1.bias", r.norm1, 2, "a bias") ||
      !add("attn.c_attn.weight", r.qkv, 1, "a weight") ||
      !add("attn.c_attn.bias", r.qkv, 2, "a bias") ||
      !add("attn.c_proj.weight", r.out, 1, "a weight") ||
      !add("attn.c_proj.bias", r.out, 2, "a bias") || !add("ln_2.weight", r.norm2, 1, "a weight") ||
      !add("ln_2.bias", r.norm2, 2, "a bias") || !add("mlp.c_fc.weight", r.mlpIn, 1, "a weight") ||
      !add("mlp.c_fc.bias", r.mlpIn, 2, "a bias") ||
      !add("mlp.c_proj.weight", r.down, 1, "a weight") ||
      !add("mlp.c_proj.bias", r.down, 2, "a bias"))
    return std::nullopt;
  return t;
}

std::optional<std::vector<HfTensor>> Matcher::llama(const LayerRoles &r) {
  if (!r.q)
    return refuse(r.qkv, "fused: Llama projects q, k and v separately (a model with RMSNorm "
                         "exports as Llama)"),
           std::nullopt;
  if (r.norm2->kind != OpKind::RMSNorm)
    return refuse(r.norm2, "with an RMSNorm before attention: Llama has two RMSNorms"),
           std::nullopt;
  if (!r.gating)
    return refuse(r.activation, "in the MLP: Llama's is silu(gate) * up"), std::nullopt;
  for (const Op *rope : {r.ropeQ, r.ropeK}) {
    if (!rope)
      return refuse(r.attention, "without rotary embeddings on q and k: Llama has them"),
             std::nullopt;
    auto headDim = ropeSize(rope, "head_dim"), rotary = ropeSize(rope, "rotary_dim");
    if (rotary && headDim && *rotary != *headDim)
      return refuse(rope, "on part of each head (rotary_dim): Llama rotates every dim"),
             std::nullopt;
    ropeTheta = rope->realAttr("theta").value_or(ropeTheta);
  }
  std::vector<HfTensor> t;
  auto add = [&](const char *hf, const Op *op, size_t operand, Transform how, int64_t heads = 0) {
    std::string p = paramOperand(op, operand);
    if (p.empty())
      return refuse(op, "without a weight");
    if (op->kind == OpKind::Linear && op->boolAttr("bias", true))
      return refuse(op, "with a bias: Llama's linears have none");
    t.push_back(
        {fmt::format("model.layers.{{}}.{}", hf), checkpointName(p, true), true, how, heads});
    return true;
  };
  const ExportModel e = exportModelOf(m);
  const int64_t kvHeads = e.kvHeads ? e.kvHeads : e.heads;
  if (!add("input_layernorm.weight", r.norm1, 1, Transform::Copy) ||
      !add("self_attn.q_proj.weight", r.q, 1, Transform::TransposeRotaryRows, e.heads) ||
      !add("self_attn.k_proj.weight", r.k, 1, Transform::TransposeRotaryRows, kvHeads) ||
      !add("self_attn.v_proj.weight", r.v, 1, Transform::Transpose) ||
      !add("self_attn.o_proj.weight", r.out, 1, Transform::Transpose) ||
      !add("post_attention_layernorm.weight", r.norm2, 1, Transform::Copy) ||
      !add("mlp.gate_proj.weight", r.mlpIn, 1, Transform::Transpose) ||
      !add("mlp.up_proj.weight", r.up, 1, Transform::Transpose) ||
      !add("mlp.down_proj.weight", r.down, 1, Transform::Transpose))
    return std::nullopt;
  return t;
}

std::optional<std::vector<HfTensor>> Matcher::gptNeox(const LayerRoles &r) {
  if (!parallelResidual(r))
    return refuse(r.norm2, "reads the sum after attention: GPT-NeoX's MLP norm reads the layer's "
                           "input (a parallel residual; a model with LayerNorm and separate q, "
                           "k, v exports as GPT-NeoX)"),
           std::nullopt;
  if (r.norm2->kind != OpKind::LayerNorm)
    return refuse(r.norm2, "with a LayerNorm before attention: GPT-NeoX has two LayerNorms"),
           std::nullopt;
  if (r.gating || r.activation->kind != OpKind::Gelu)
    return refuse(r.activation, "in the MLP: GPT-NeoX's is gelu"), std::nullopt;
  exactGelu = geluIsExact(*r.activation);
  const ExportModel e = exportModelOf(m);
  if (e.kvHeads && e.kvHeads != e.heads)
    return refuse(r.attention, "with grouped key/value heads: GPT-NeoX's attention has as many "
                               "as query heads"),
           std::nullopt;
  for (const Op *rope : {r.ropeQ, r.ropeK}) {
    if (!rope)
      return refuse(r.attention, "without rotary embeddings on q and k: GPT-NeoX has them"),
             std::nullopt;
    auto hd = ropeSize(rope, "head_dim"), rotary = ropeSize(rope, "rotary_dim");
    if (!hd)
      return refuse(rope, "without a known head_dim"), std::nullopt;
    if ((rotaryDim && rotaryDim != rotary.value_or(*hd)) || (headDim && headDim != *hd))
      return refuse(rope, "differs from the other rotary embedding: GPT-NeoX rotates q and k "
                          "alike"),
             std::nullopt;
    headDim = *hd;
    rotaryDim = rotary.value_or(*hd);
    ropeTheta = rope->realAttr("theta").value_or(ropeTheta);
  }
  std::vector<HfTensor> t;
  auto name = [&](const Op *op, size_t operand, const char *what) -> std::optional<std::string> {
    std::string p = paramOperand(op, operand);
    if (p.empty())
      return refuse(op, fmt::format("without {}: GPT-NeoX's has one", what)), std::nullopt;
    return checkpointName(p, true);
  };
  auto add = [&](const char *hf, const Op *op, size_t operand, const char *what, Transform how) {
    auto p = name(op, operand, what);
    if (p)
      t.push_back({fmt::format("gpt_neox.layers.{{}}.{}", hf), *p, true, how});
    return p.has_value();
  };
  // q, k and v fused per head, weights and biases alike.
  for (auto [operand, hf, what] :
       {std::tuple{size_t(1), "weight", "a weight"}, std::tuple{size_t(2), "bias", "a bias"}}) {
    auto q = name(r.q, operand, what), k = name(r.k, operand, what), v = name(r.v, operand, what);
    if (!q || !k || !v)
      return std::nullopt;
    t.push_back({fmt::format("gpt_neox.layers.{{}}.attention.query_key_value.{}", hf),
                 *q,
                 true,
                 Transform::FuseQkvPerHead,
                 e.heads,
                 rotaryDim,
                 {*q, *k, *v}});
  }
  if (!add("input_layernorm.weight", r.norm1, 1, "a weight", Transform::Copy) ||
      !add("input_layernorm.bias", r.norm1, 2, "a bias", Transform::Copy) ||
      !add("post_attention_layernorm.weight", r.norm2, 1, "a weight", Transform::Copy) ||
      !add("post_attention_layernorm.bias", r.norm2, 2, "a bias", Transform::Copy) ||
      !add("attention.dense.weight", r.out, 1, "a weight", Transform::Transpose) ||
      !add("attention.dense.bias", r.out, 2, "a bias", Transform::Copy) ||
      !add("mlp.dense_h_to_4h.weight", r.mlpIn, 1, "a weight", Transform::Transpose) ||
      !add("mlp.dense_h_to_4h.bias", r.mlpIn, 2, "a bias", Transform::Copy) ||
      !add("mlp.dense_4h_to_h.weight", r.down, 1, "a weight", Transform::Transpose) ||
      !add("mlp.dense_4h_to_h.bias", r.down, 2, "a bias", Transform::Copy))
    return std::nullopt;
  return t;
}

bool Matcher::endTensors(Family family, std::vector<HfTensor> &t) {
  const bool gpt2 = family == Family::Gpt2, neox = family == Family::GptNeox;
  const Op *tokens = nullptr, *positions = nullptr, *norm = nullptr, *head = nullptr;
  for (const auto &op : m.pre.fwd.ops) {
    if (op->kind == OpKind::Embedding)
      tokens = op.get();
    else if (op->kind == OpKind::PositionEmbedding)
      positions = op.get();
    else if (!isInferenceIdentity(op->kind) && op->kind != OpKind::Param && op->kind != OpKind::Add)
      return refuse(op.get(), "before the layers has no transformers counterpart");
  }
  for (const auto &op : m.post.fwd.ops) {
    if (op->kind == OpKind::LayerNorm || op->kind == OpKind::RMSNorm)
      norm = op.get();
    else if (op->kind == OpKind::LMHead)
      head = op.get();
    else if (!isInferenceIdentity(op->kind) && op->kind != OpKind::Param &&
             op->kind != OpKind::CrossEntropy)
      return refuse(op.get(), "after the layers has no transformers counterpart");
  }
  if (!tokens || !norm || !head)
    return refuse(nullptr, "the model needs a token embedding before its layers and a norm and "
                           "an LM head after them");
  if (gpt2 != (positions != nullptr))
    return refuse(positions ? positions : tokens,
                  gpt2 ? "GPT-2 adds learned positions to the token embedding"
                       : "learned positions: Llama and GPT-NeoX have rotary embeddings only");
  if ((norm->kind == OpKind::LayerNorm) != (gpt2 || neox))
    return refuse(norm, "after the layers is not the layers' kind of norm");
  tiedHead = head->boolAttr("tied", false);
  if (gpt2 && !tiedHead)
    return refuse(head, "untied: GPT-2's LM head is the token table");
  if (neox && tiedHead)
    return refuse(head, "tied: GPT-NeoX's LM head (embed_out) is a table of its own");
  const std::string prefix = gpt2 ? "transformer." : neox ? "gpt_neox." : "model.";
  auto add = [&](const std::string &hf, const Op *op, size_t operand) {
    std::string p = paramOperand(op, operand);
    if (p.empty())
      return refuse(op, "without the parameter transformers has here");
    t.push_back({hf, checkpointName(p, false)});
    return true;
  };
  const size_t tableOperand = 1; // embedding(tokens, table)
  const char *table = gpt2 ? "wte.weight" : neox ? "embed_in.weight" : "embed_tokens.weight";
  const char *finalNorm = gpt2 ? "ln_f" : neox ? "final_layer_norm" : "norm";
  if (!add(prefix + table, tokens, tableOperand) ||
      (gpt2 && !add("transformer.wpe.weight", positions, 0)) ||
      !add(prefix + finalNorm + ".weight", norm, 1) ||
      ((gpt2 || neox) && !add(prefix + finalNorm + ".bias", norm, 2)))
    return false;
  // An untied head is [vocab, hidden], as transformers' lm_head (embed_out).
  if (!tiedHead && !add(neox ? "embed_out.weight" : "lm_head.weight", head, 1))
    return false;
  return true;
}

/// The values of a transformers tensor from the checkpoint's [rows, cols].
std::vector<float> transformed(const std::vector<float> &in, int64_t rows, int64_t cols,
                               const HfTensor &t) {
  if (t.transform == Transform::Copy)
    return in;
  std::vector<float> out(in.size());
  const int64_t heads = t.heads > 0 ? t.heads : 1, headDim = cols / heads;
  for (int64_t c = 0; c < cols; ++c) {
    int64_t from = c; // the checkpoint's column of transformers' row c
    if (t.transform == Transform::TransposeRotaryRows) {
      const int64_t h = c / headDim, j = c % headDim, half = headDim / 2;
      from = h * headDim + (j < half ? 2 * j : 2 * (j - half) + 1);
    }
    for (int64_t r = 0; r < rows; ++r)
      out[size_t(c * rows + r)] = in[size_t(r * cols + from)];
  }
  return out;
}

/// GPT-NeoX's query_key_value from q, k and v, each [in, out] (weights) or
/// [out] (biases): [3 * out, in] (or [3 * out]) with head h's q, k and v rows
/// together, q's and k's first rotaryDim rows of each head permuted from
/// interleaved rotary pairs (2i, 2i+1) to halves (i, i + rotaryDim / 2).
std::vector<float> fusedQkv(const std::array<std::vector<float>, 3> &parts, int64_t in, int64_t out,
                            const HfTensor &t) {
  const int64_t heads = t.heads, headDim = out / heads, half = t.rotaryDim / 2;
  std::vector<float> fused(size_t(3 * out * in));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t which = 0; which < 3; ++which)
      for (int64_t j = 0; j < headDim; ++j) {
        int64_t from = j; // the dim of the head the row comes from
        if (which < 2 && j < t.rotaryDim)
          from = j < half ? 2 * j : 2 * (j - half) + 1;
        const int64_t row = (h * 3 + which) * headDim + j, col = h * headDim + from;
        for (int64_t i = 0; i < in; ++i)
          fused[size_t(row * in + i)] = parts[size_t(which)][size_t(i * out + col)];
      }
  return fused;
}

/// A tensor's values: F32 (latest.safetensors) or BF16 (the model file of a
/// bf16 run).
std::optional<std::vector<float>> valuesOf(const rt::TensorData &t) {
  if (t.dtype != "BF16")
    return t.floats();
  std::vector<float> v(t.bytes.size() / 2);
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t half;
    std::memcpy(&half, &t.bytes[2 * i], 2);
    v[i] = rt::fromBf16(half);
  }
  return v;
}

/// The values as BF16 bytes (exact for weights a bf16 run held).
std::vector<std::byte> bf16Bytes(const std::vector<float> &values) {
  std::vector<std::byte> bytes(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t half = rt::toBf16(values[i]);
    std::memcpy(&bytes[2 * i], &half, 2);
  }
  return bytes;
}

/// The model's special tokens are the data's business, not the model's:
/// none is declared (GPT-2's defaults, 50256, lie outside small vocabularies).
std::string configJson(const Module &m, Family family, const std::vector<int64_t> &tableShape,
                       int64_t ffn, int64_t positions, const Matcher &matched) {
  const ExportModel e = exportModelOf(m);
  const int64_t vocab = tableShape[0], hidden = tableShape[1];
  const std::string dtype = torchDtypeName(m.train.dtype);
  if (family == Family::Gpt2)
    return fmt::format(
        "{{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n"
        "  \"vocab_size\": {},\n  \"n_positions\": {},\n  \"n_embd\": {},\n  \"n_layer\": {},\n"
        "  \"n_head\": {},\n  \"n_inner\": {},\n  \"activation_function\": \"{}\",\n"
        "  \"layer_norm_epsilon\": {},\n  \"resid_pdrop\": {},\n  \"embd_pdrop\": {},\n"
        "  \"attn_pdrop\": {},\n  \"scale_attn_weights\": true,\n  \"tie_word_embeddings\": true,\n"
        "  \"bos_token_id\": null,\n  \"eos_token_id\": null,\n"
        "  \"use_cache\": true,\n  \"torch_dtype\": \"{}\"\n}}\n",
        vocab, positions, hidden, e.layers, e.heads, ffn, matched.exactGelu ? "gelu" : "gelu_new",
        matched.normEps, e.dropout, e.dropout, e.attentionDropout, dtype);
  if (family == Family::GptNeox) {
    // rope_parameters for transformers 5; rotary_pct and rotary_emb_base
    // for the versions before it.
    const double partial = double(matched.rotaryDim) / double(matched.headDim);
    return fmt::format(
        "{{\n  \"architectures\": [\"GPTNeoXForCausalLM\"],\n  \"model_type\": \"gpt_neox\",\n"
        "  \"vocab_size\": {},\n  \"hidden_size\": {},\n  \"intermediate_size\": {},\n"
        "  \"num_hidden_layers\": {},\n  \"num_attention_heads\": {},\n  \"hidden_act\": \"{}\",\n"
        "  \"max_position_embeddings\": {},\n  \"layer_norm_eps\": {},\n"
        "  \"use_parallel_residual\": true,\n  \"attention_bias\": true,\n"
        "  \"rope_parameters\": {{\"rope_type\": \"default\", \"rope_theta\": {}, "
        "\"partial_rotary_factor\": {}}},\n  \"rotary_pct\": {},\n  \"rotary_emb_base\": {},\n"
        "  \"attention_dropout\": {},\n  \"hidden_dropout\": {},\n"
        "  \"tie_word_embeddings\": false,\n  \"bos_token_id\": null,\n  \"eos_token_id\": null,\n"
        "  \"use_cache\": true,\n  \"torch_dtype\": \"{}\"\n}}\n",
        vocab, hidden, ffn, e.layers, e.heads, matched.exactGelu ? "gelu" : "gelu_new", e.seqLen,
        matched.normEps, matched.ropeTheta, partial, partial, matched.ropeTheta, e.attentionDropout,
        e.dropout, dtype);
  }
  const int64_t kvHeads = e.kvHeads ? e.kvHeads : e.heads;
  return fmt::format(
      "{{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n"
      "  \"vocab_size\": {},\n  \"hidden_size\": {},\n  \"intermediate_size\": {},\n"
      "  \"num_hidden_layers\": {},\n  \"num_attention_heads\": {},\n"
      "  \"num_key_value_heads\": {},\n  \"head_dim\": {},\n  \"hidden_act\": \"silu\",\n"
      "  \"max_position_embeddings\": {},\n  \"rms_norm_eps\": {},\n  \"rope_theta\": {},\n"
      "  \"rope_parameters\": {{\"rope_type\": \"default\", \"rope_theta\": {}}},\n"
      "  \"attention_bias\": false,\n  \"mlp_bias\": false,\n  \"attention_dropout\": {},\n"
      "  \"tie_word_embeddings\": {},\n  \"bos_token_id\": null,\n  \"eos_token_id\": null,\n"
      "  \"use_cache\": true,\n  \"torch_dtype\": \"{}\"\n}}\n",
      vocab, hidden, ffn, e.layers, e.heads, kvHeads, hidden / e.heads, e.seqLen, matched.normEps,
      matched.ropeTheta, matched.ropeTheta, e.attentionDropout, matched.tiedHead ? "true" : "false",
      dtype);
}

} // namespace

namespace {

/// Every checkpoint tensor name of the model (the trainer's naming: a
/// layer's as `layers.<l>.<name>`, with its optimizer state's suffixes) and
/// its full shape, from the model lowered at micro-batch 1 and tp 1.
std::optional<std::map<std::string, std::vector<int64_t>>>
expectedShapes(const Module &m, int64_t layers, DiagnosticEngine &diag) {
  std::optional<LoweredStage> st = lowerForStage(m, 1, 1, diag);
  if (!st)
    return std::nullopt;
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const ParamLayout &p : st->params) {
    std::vector<std::string> names;
    if (p.name.rfind("layer.", 0) == 0) {
      for (int64_t l = 0; l < layers; ++l)
        names.push_back(fmt::format("layers.{}.{}", l, p.name.substr(6)));
    } else {
      names.push_back(p.name);
    }
    for (const std::string &n : names)
      for (const char *suffix : {"", ".master", ".adam_m", ".adam_v"})
        shapes[n + suffix] = p.fullShape;
  }
  return shapes;
}

/// A folder beside `dir` (same filesystem, so its files can be renamed in).
bool stageFolder(const std::string &dir, std::string &staging, DiagnosticEngine &diag) {
  llvm::SmallString<256> parent(dir);
  llvm::sys::path::remove_filename(parent);
  if (parent.empty())
    parent = ".";
  if (std::error_code ec = llvm::sys::fs::create_directories(parent)) {
    diag.error({}, fmt::format("cannot create the folder '{}': {}", parent.str(), ec.message()));
    return false;
  }
  llvm::SmallString<256> made;
  if (std::error_code ec = llvm::sys::fs::createUniqueDirectory(dir + ".tmp", made)) {
    diag.error({}, fmt::format("cannot write the folder '{}': {}", dir, ec.message()));
    return false;
  }
  staging = std::string(made);
  return true;
}

/// Removes the staging folder and what is left in it.
struct StagingCleanup {
  std::string folder;
  ~StagingCleanup() { llvm::sys::fs::remove_directories(folder); }
};

/// Moves the staged files into `dir`: the whole folder when `dir` does not
/// exist yet, else file by file, the weights before the config that
/// describes them.
bool moveStagedFiles(const std::string &staging, const std::string &dir,
                     const std::vector<std::string> &files, DiagnosticEngine &diag) {
  if (!llvm::sys::fs::exists(dir)) {
    if (std::error_code ec = llvm::sys::fs::rename(staging, dir)) {
      diag.error({}, fmt::format("cannot write the folder '{}': {}", dir, ec.message()));
      return false;
    }
    return true;
  }
  if (!llvm::sys::fs::is_directory(dir)) {
    diag.error({}, fmt::format("cannot write the folder '{}': a file of that name is there", dir));
    return false;
  }
  for (const std::string &f : files)
    if (std::error_code ec = llvm::sys::fs::rename(staging + "/" + f, dir + "/" + f)) {
      diag.error({}, fmt::format("cannot write '{}/{}': {}", dir, f, ec.message()));
      return false;
    }
  return true;
}

/// The checkpoint at `checkpointPath` (a trainer's folder: its model file;
/// or a safetensors file) when it is of this model: its metadata names the
/// model, every tensor matches the hash recorded for it, and it holds no
/// tensor the model lacks. `source` gets the file read, `expected` every
/// tensor name of the model with its shape; nullopt after reporting.
std::optional<rt::SafetensorsFile> readCheckpointOfModel(
    const Module &m, const ExportModel &e, const std::string &checkpointPath, std::string &source,
    std::optional<std::map<std::string, std::vector<int64_t>>> &expected, DiagnosticEngine &diag) {
  std::string error;
  // A checkpoint folder: its model file holds the weights (the optimizer
  // file beside it is not needed); a file: read as it is.
  std::error_code isDir;
  source = std::filesystem::is_directory(checkpointPath, isDir)
               ? checkpointPath + "/model.safetensors"
               : checkpointPath;
  auto ckpt = rt::readSafetensors(source, error);
  if (!ckpt) {
    diag.error({}, "--checkpoint: " + error);
    return std::nullopt;
  }
  auto model = ckpt->metadata.find("model");
  if (model == ckpt->metadata.end() || model->second != m.name) {
    diag.error({}, fmt::format("--checkpoint: {} is {}, not of model '{}'", source,
                               model == ckpt->metadata.end()
                                   ? "not a trainer checkpoint (no 'model' in its metadata)"
                                   : "a checkpoint of '" + model->second + "'",
                               m.name));
    return std::nullopt;
  }
  if (std::string damaged = rt::recordedHashProblem(*ckpt, source); !damaged.empty()) {
    diag.error({}, "--checkpoint: " + damaged);
    return std::nullopt;
  }
  // The checkpoint must be of this model's shape: its layer count and every
  // tensor's shape, as the trainer's resume asks (a same-named model of
  // another size would otherwise export under this one's config).
  expected = expectedShapes(m, e.layers, diag);
  if (!expected)
    return std::nullopt;
  for (const rt::TensorData &t : ckpt->tensors)
    if (!expected->count(t.name)) {
      diag.error({}, fmt::format("--checkpoint: {} holds '{}', which model '{}' ({} layers) does "
                                 "not have: a checkpoint of another shape of the model",
                                 source, t.name, m.name, e.layers));
      return std::nullopt;
    }
  return ckpt;
}

/// Writes `tensors` and `config` into folder `dir`: staged beside it and
/// moved in only when both files are whole, so a full disk leaves `dir` as
/// it was.
bool writeExportFolder(const std::string &dir, const std::vector<rt::TensorData> &tensors,
                       const std::string &config, DiagnosticEngine &diag) {
  std::string staging;
  if (!stageFolder(dir, staging, diag))
    return false;
  StagingCleanup cleanup{staging};
  if (auto failed =
          rt::writeSafetensors(staging + "/model.safetensors", tensors, {{"format", "pt"}})) {
    diag.error({}, *failed);
    return false;
  }
  OutputFile file(staging + "/config.json", "config.json", diag);
  if (file.failed())
    return false;
  file.os() << config;
  return file.commit() && moveStagedFiles(staging, dir, {"model.safetensors", "config.json"}, diag);
}

} // namespace

bool mist::exportHuggingFace(const Module &m, const std::string &checkpointPath,
                             const std::string &dir, DiagnosticEngine &diag) {
  Matcher matcher(m, diag);
  auto roles = matcher.matchLayer();
  Family family = Family::Gpt2;
  auto plan = roles ? matcher.tensors(*roles, family) : std::nullopt;
  if (!plan)
    return false;
  const ExportModel e = exportModelOf(m);
  std::string source;
  std::optional<std::map<std::string, std::vector<int64_t>>> expected;
  std::optional<rt::SafetensorsFile> ckpt =
      readCheckpointOfModel(m, e, checkpointPath, source, expected, diag);
  if (!ckpt)
    return false;
  std::vector<rt::TensorData> out;
  std::vector<int64_t> tableShape;
  int64_t ffn = 0, positions = e.seqLen;
  // A checkpoint tensor's values and shape, or nullopt after reporting.
  auto load = [&](const std::string &ours, const std::string &theirs)
      -> std::optional<std::pair<std::vector<float>, std::vector<int64_t>>> {
    const rt::TensorData *found = ckpt->find(ours);
    if (found && expected->count(ours) && found->shape != expected->at(ours)) {
      diag.error({}, fmt::format("--checkpoint: tensor '{}' of {} has shape [{}]; model '{}' "
                                 "has [{}]: a checkpoint of another shape of the model",
                                 ours, source, fmt::join(found->shape, ", "), m.name,
                                 fmt::join(expected->at(ours), ", ")));
      return std::nullopt;
    }
    auto values = found ? valuesOf(*found) : std::nullopt;
    if (!values) {
      diag.error({}, fmt::format("--checkpoint: {} has no F32 or BF16 tensor '{}' (for {})", source,
                                 ours, theirs));
      return std::nullopt;
    }
    return std::pair{std::move(*values), found->shape};
  };
  for (const HfTensor &t : *plan)
    for (int64_t l = 0; l < (t.perLayer ? e.layers : 1); ++l) {
      const std::string ours = fmt::format(fmt::runtime(t.ourName), l);
      const std::string theirs = fmt::format(fmt::runtime(t.hfName), l);
      std::vector<float> v;
      std::vector<int64_t> shape;
      if (t.transform == Transform::FuseQkvPerHead) {
        std::array<std::vector<float>, 3> parts;
        for (size_t k = 0; k < 3; ++k) {
          auto part = load(fmt::format(fmt::runtime(t.parts[k]), l), theirs);
          if (!part)
            return false;
          if (k > 0 && part->second != shape) {
            diag.error({}, fmt::format("--checkpoint: the q, k and v tensors of {} differ in shape",
                                       theirs));
            return false;
          }
          parts[k] = std::move(part->first);
          shape = part->second;
        }
        const int64_t in = shape.size() == 2 ? shape[0] : 1, out = shape.back();
        if (shape.empty() || shape.size() > 2 || out % t.heads != 0) {
          diag.error({},
                     fmt::format("--checkpoint: '{}' does not split into {} heads", ours, t.heads));
          return false;
        }
        v = fusedQkv(parts, in, out, t);
        shape = shape.size() == 2 ? std::vector<int64_t>{3 * out, in} : std::vector{3 * out};
      } else {
        auto loaded = load(ours, theirs);
        if (!loaded)
          return false;
        shape = loaded->second;
        const int64_t rows = shape.empty() ? 1 : shape[0], cols = shape.size() > 1 ? shape[1] : 1;
        if (t.transform != Transform::Copy && shape.size() != 2) {
          diag.error({}, fmt::format("--checkpoint: tensor '{}' is not a matrix", ours));
          return false;
        }
        if (theirs.ends_with("wte.weight") || theirs.ends_with("embed_tokens.weight") ||
            theirs.ends_with("embed_in.weight"))
          tableShape = shape;
        if (theirs.ends_with("wpe.weight"))
          positions = rows;
        if (theirs.ends_with("c_fc.weight") || theirs.ends_with("up_proj.weight") ||
            theirs.ends_with("dense_h_to_4h.weight"))
          ffn = cols;
        v = transformed(loaded->first, rows, cols, t);
        if (t.transform != Transform::Copy)
          std::swap(shape[0], shape[1]);
      }
      rt::TensorData d;
      d.name = theirs;
      d.shape = shape;
      if (m.train.dtype == DType::BF16) {
        d.dtype = "BF16";
        d.bytes = bf16Bytes(v);
      } else {
        d = rt::TensorData::fromFloats(theirs, shape, v);
      }
      out.push_back(std::move(d));
    }
  if (!writeExportFolder(dir, out, configJson(m, family, tableShape, ffn, positions, matcher),
                         diag))
    return false;
  llvm::errs() << fmt::format("mistc: {} ({} tensors, step {} of {}) written to {} as {}\n", m.name,
                              out.size(),
                              ckpt->metadata.count("step") ? ckpt->metadata.at("step") : "?",
                              checkpointPath, dir, className(family));
  return true;
}
