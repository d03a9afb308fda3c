//===- HuggingFaceLayout.h - How a model's tensors map to transformers' ---===//
/// \file
/// The correspondence between a .mist model's parameters and a transformers
/// model's, shared by the export (--emit=hf) and the import (--from-hf).
/// The parameters are matched to transformers' by what the model's layer
/// computes, not by their names (a .mist file names them as it likes): the
/// two norms, the linears feeding and leaving attention, the MLP's linears
/// around its activation. Three families are known:
/// - GPT-2 (`GPT2LMHeadModel`): LayerNorm, learned positions, one fused
///   q/k/v linear with biases, GELU (tanh, GPT-2's own), LM head tied to the
///   token table. Its Conv1D weights are [in, out], as mistc's; the fused
///   q/k/v order is GPT-2's (lang/SPEC.md, "Layouts").
/// - Llama (`LlamaForCausalLM`): RMSNorm, rotary on every dim of q and k,
///   separate q/k/v (grouped-query allowed), a SwiGLU MLP, no biases. Its
///   weights are [out, in] (transposed), and q's and k's rows per head are
///   permuted from mistc's interleaved rotary pairs (2i, 2i+1) to its halves
///   (i, i + d/2).
/// - GPT-NeoX (`GPTNeoXForCausalLM`): LayerNorm, separate q/k/v linears with
///   biases (fused per head into query_key_value: q_h, k_h, v_h), partial
///   rotary (rotary_pct = rotary_dim / head_dim, the rotating rows permuted
///   as Llama's), the parallel residual (the MLP's norm reads the layer's
///   input), GELU (hidden_act "gelu" exact, "gelu_new" tanh), an untied head
///   (embed_out). Weights [out, in].
/// A model that is none of them is refused at the first op that does not
/// fit, with its location.
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/IR.h"
#include "runtime/checkpoint/Safetensors.h"
#include "support/Diagnostics.h"
#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mist::hf {

enum class Family { Gpt2, Llama, GptNeox };

/// transformers' class for the family.
const char *className(Family f);

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

/// Matches a module's ops to a transformers family's tensors.
class Matcher {
public:
  /// `flag` starts every refusal (--emit=hf, --from-hf).
  Matcher(const Module &m, DiagnosticEngine &diag, std::string flag)
      : m(m), diag(diag), flag(std::move(flag)) {}

  /// The roles of the layer's ops; nullopt after reporting the op that fits none.
  std::optional<LayerRoles> matchLayer();
  /// The transformers model, or nullopt after reporting why there is none.
  std::optional<std::vector<HfTensor>> tensors(const LayerRoles &r, Family &family);

  double normEps = 1e-5, ropeTheta = 10000;
  bool exactGelu = false; ///< the MLP computes x Phi(x) ("gelu"), else tanh ("gelu_new")
  bool tiedHead = false;
  int64_t rotaryDim = 0, headDim = 0; ///< GPT-NeoX: rotary_pct = rotaryDim / headDim

private:
  /// Reports why the model is not this family's, at `op` (the model when null).
  bool refuse(const Op *op, const std::string &why);
  /// The one op of `kind` in `ops`, or null after reporting none or a second.
  const Op *single(const std::vector<const Op *> &ops, OpKind kind, const char *role);
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
  std::string flag;
};

/// The values of a transformers tensor from the checkpoint's [rows, cols].
std::vector<float> transformed(const std::vector<float> &in, int64_t rows, int64_t cols,
                               const HfTensor &t);
/// The checkpoint's [rows, cols] values from a transformers tensor made by
/// `transformed` (its inverse).
std::vector<float> untransformed(const std::vector<float> &hf, int64_t rows, int64_t cols,
                                 const HfTensor &t);

/// GPT-NeoX's query_key_value from q, k and v, each [in, out] (weights) or
/// [out] (biases): [3 * out, in] (or [3 * out]) with head h's q, k and v rows
/// together, q's and k's first rotaryDim rows of each head permuted from
/// interleaved rotary pairs (2i, 2i+1) to halves (i, i + rotaryDim / 2).
std::vector<float> fusedQkv(const std::array<std::vector<float>, 3> &parts, int64_t in, int64_t out,
                            const HfTensor &t);
/// q, k and v ([in, out] each, or [out]) from GPT-NeoX's query_key_value
/// (the inverse of fusedQkv).
std::array<std::vector<float>, 3> splitQkv(const std::vector<float> &fused, int64_t in, int64_t out,
                                           const HfTensor &t);

/// A tensor's values as floats: F32, BF16 or F16; nullopt for other dtypes.
std::optional<std::vector<float>> valuesOf(const rt::TensorData &t);
/// The values as BF16 bytes (exact for weights a bf16 run held).
std::vector<std::byte> bf16Bytes(const std::vector<float> &values);

/// Every checkpoint tensor name of the model (the trainer's naming: a
/// layer's as `layers.<l>.<name>`, with its optimizer state's suffixes) and
/// its full shape, from the model lowered at micro-batch 1 and tp 1.
std::optional<std::map<std::string, std::vector<int64_t>>>
checkpointShapes(const Module &m, int64_t layers, DiagnosticEngine &diag);

/// transformers' config.json for the model.
std::string configJson(const Module &m, Family family, const std::vector<int64_t> &tableShape,
                       int64_t ffn, int64_t positions, const Matcher &matched);

} // namespace mist::hf
