//===- HuggingFaceImport.h - A transformers model as a trainer's weights --===//
/// \file
/// `mistc MODEL.mist --emit=checkpoint --from-hf HF_DIR -o CKPT_DIR` reads
/// a Hugging Face model folder (config.json and model.safetensors, or the
/// shards model.safetensors.index.json names; F32, BF16 or F16) of a GPT-2,
/// Llama (1-3) or GPT-NeoX model and writes CKPT_DIR/model.safetensors, a
/// trainer model file at step 0 holding the same weights under the model's
/// names, which `./train --init-from CKPT_DIR` starts from under any plan
/// (continued pretraining or fine-tuning).
///
/// The correspondence is the export's (HuggingFaceLayout.h), run backwards.
/// Before a tensor is read, config.json is compared with the model: the
/// family (model_type), sizes (vocabulary, hidden, layers, heads, key/value
/// heads, MLP width, rotary dims), activation, norm epsilon, rotary base and
/// tied head; every difference is an error located at the model's
/// declaration. Then every tensor's shape, and no tensor may be left over
/// (a bias the model lacks, a layer more) but transformers' buffers.
/// The weights are written in F32 (exact for every source dtype).
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/IR.h"
#include "support/Diagnostics.h"
#include <string>

namespace mist {

/// False after reporting why not.
bool importHuggingFace(const Module &m, const std::string &hfDir, const std::string &outDir,
                       DiagnosticEngine &diag);

} // namespace mist
