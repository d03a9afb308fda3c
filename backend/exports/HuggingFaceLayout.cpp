//===- HuggingFaceLayout.cpp - How a model's tensors map to transformers' -===//
#include "backend/exports/HuggingFaceLayout.h"

#include "backend/exports/ExportProjection.h"
#include "backend/trainer/Lowering.h"
#include "ir/OpSemantics.h"
#include "runtime/device/DType.h"
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <limits>

namespace mist::hf {

namespace {

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

} // namespace

const char *className(Family f) {
  return f == Family::Gpt2    ? "GPT2LMHeadModel"
         : f == Family::Llama ? "LlamaForCausalLM"
                              : "GPTNeoXForCausalLM";
}

bool Matcher::refuse(const Op *op, const std::string &why) {
  diag.error(
      op ? op->loc : m.loc,
      fmt::format("{}: {}{}", flag, op ? fmt::format("'{}' ", opName(op->kind).str()) : "", why));
  return false;
}
const Op *Matcher::single(const std::vector<const Op *> &ops, OpKind kind, const char *role) {
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

std::vector<float> untransformed(const std::vector<float> &hf, int64_t rows, int64_t cols,
                                 const HfTensor &t) {
  if (t.transform == Transform::Copy)
    return hf;
  std::vector<float> ours(hf.size());
  const int64_t heads = t.heads > 0 ? t.heads : 1, headDim = cols / heads;
  for (int64_t c = 0; c < cols; ++c) {
    int64_t from = c; // as in transformed: our column of transformers' row c
    if (t.transform == Transform::TransposeRotaryRows) {
      const int64_t h = c / headDim, j = c % headDim, half = headDim / 2;
      from = h * headDim + (j < half ? 2 * j : 2 * (j - half) + 1);
    }
    for (int64_t r = 0; r < rows; ++r)
      ours[size_t(r * cols + from)] = hf[size_t(c * rows + r)];
  }
  return ours;
}

std::array<std::vector<float>, 3> splitQkv(const std::vector<float> &fused, int64_t in, int64_t out,
                                           const HfTensor &t) {
  const int64_t heads = t.heads, headDim = out / heads, half = t.rotaryDim / 2;
  std::array<std::vector<float>, 3> parts;
  for (auto &p : parts)
    p.assign(size_t(in * out), 0.0f);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t which = 0; which < 3; ++which)
      for (int64_t j = 0; j < headDim; ++j) {
        int64_t from = j; // as in fusedQkv
        if (which < 2 && j < t.rotaryDim)
          from = j < half ? 2 * j : 2 * (j - half) + 1;
        const int64_t row = (h * 3 + which) * headDim + j, col = h * headDim + from;
        for (int64_t i = 0; i < in; ++i)
          parts[size_t(which)][size_t(i * out + col)] = fused[size_t(row * in + i)];
      }
  return parts;
}

/// bf16 run).
std::optional<std::vector<float>> valuesOf(const rt::TensorData &t) {
  if (t.dtype == "F16") { // Hugging Face checkpoints are often fp16
    std::vector<float> v(t.bytes.size() / 2);
    for (size_t i = 0; i < v.size(); ++i) {
      uint16_t h;
      std::memcpy(&h, &t.bytes[2 * i], 2);
      const uint32_t sign = uint32_t(h >> 15) << 31, exponent = (h >> 10) & 0x1f,
                     mantissa = h & 0x3ffu;
      float magnitude;
      if (exponent == 0) // zero or subnormal: mantissa * 2^-24
        magnitude = std::ldexp(float(mantissa), -24);
      else if (exponent == 31)
        magnitude = mantissa ? std::numeric_limits<float>::quiet_NaN()
                             : std::numeric_limits<float>::infinity();
      else
        magnitude = std::ldexp(float(mantissa | 0x400u), int(exponent) - 25);
      v[i] = sign ? -magnitude : magnitude;
    }
    return v;
  }
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

/// Every checkpoint tensor name of the model (the trainer's naming: a
/// layer's as `layers.<l>.<name>`, with its optimizer state's suffixes) and
/// its full shape, from the model lowered at micro-batch 1 and tp 1.
std::optional<std::map<std::string, std::vector<int64_t>>>
checkpointShapes(const Module &m, int64_t layers, DiagnosticEngine &diag) {
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

} // namespace mist::hf
