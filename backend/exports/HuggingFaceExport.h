//===- HuggingFaceExport.h - A trainer checkpoint as a transformers model -===//
/// \file
/// `mistc MODEL.mist --emit=hf --checkpoint CKPT -o DIR` (CKPT: a trainer's
/// latest.safetensors or the model.safetensors beside it) writes DIR/config.json
/// and DIR/model.safetensors, a directory `transformers` loads
/// (`AutoModelForCausalLM.from_pretrained(DIR)`), holding the weights of a
/// trainer checkpoint of the model.
///
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
///   biases (fused here per head into query_key_value: q_h, k_h, v_h),
///   partial rotary (rotary_pct = rotary_dim / head_dim, the rotating rows
///   permuted as Llama's), the parallel residual (the MLP's norm reads the
///   layer's input), GELU (hidden_act "gelu" exact, "gelu_new" tanh), an
///   untied head (embed_out). Weights [out, in].
/// A model that is none of them is refused at the first op that does not fit,
/// with its location. The weights are written in the training dtype (bf16
/// weights are stored widened, exactly, in checkpoints).
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/IR.h"
#include "support/Diagnostics.h"
#include <string>

namespace mist {

/// False after reporting why not: a model with no transformers counterpart,
/// a checkpoint that cannot be read or is of another model, a missing
/// tensor, a folder that cannot be written.
bool exportHuggingFace(const Module &m, const std::string &checkpointPath, const std::string &dir,
                       DiagnosticEngine &diag);

} // namespace mist
