//===- CheckpointFormat.h - The names a trainer checkpoint's files carry --===//
/// \file
/// A checkpoint folder's files and the `format` each records in its
/// metadata (runtime/trainer/Checkpointing.h describes the folder). Shared
/// with mistc, which writes a model file the trainer starts from
/// (--emit=checkpoint --from-hf).
//===----------------------------------------------------------------------===//
#pragma once

namespace mist::rt {

constexpr const char *checkpointModelFile = "model.safetensors";
constexpr const char *checkpointOptimizerFile = "optimizer.safetensors";
constexpr const char *checkpointLegacyFile = "latest.safetensors"; ///< older trainers' one file
constexpr const char *checkpointNextSuffix = ".next"; ///< the model file until a save completes

constexpr const char *legacyCheckpointFormat = "mistrt-checkpoint-1"; ///< latest.safetensors
constexpr const char *modelFileFormat = "mistrt-model-1";             ///< the weights, for sharing
constexpr const char *optimizerFileFormat = "mistrt-optimizer-1";     ///< masters and Adam moments

} // namespace mist::rt
