//===- Emit.h - What mistc writes (--emit) --------------------------------===//
/// \file
/// The one list of mistc's outputs: the driver parses --emit into it and
/// the plan actions (PlanActions.h) write the ones that act on a plan.
//===----------------------------------------------------------------------===//
#pragma once

#include "llvm/ADT/StringRef.h"
#include <optional>

namespace mist {

enum class Emit {
  // From the module alone.
  AST,
  IR,
  CostedIR,
  Summary,
  HuggingFace, ///< a trainer checkpoint as a transformers model folder (--checkpoint)
  Checkpoint,  ///< a transformers model folder (--from-hf) as a trainer's initial weights
  // On a plan (tuned, or --plan) and a cluster: runPlanActions.
  Plan,
  Report,
  Timeline,
  Schedule,
  Megatron,
  DeepSpeed,
  TorchTitan,
  TimelineSvg,
  Lowered,
  Trainer,
  ProfileShapes
};

/// Whether runPlanActions writes it.
constexpr bool actsOnPlan(Emit e) { return e >= Emit::Plan; }

/// The --emit spelling ("timeline-svg"), for messages.
const char *emitName(Emit e);

/// What to write to `outputPath` when --emit is not given, from its
/// extension: .cu/.cpp the trainer, .yaml/.yml the plan, .mir the IR, .json
/// the timeline, .svg its picture, .txt (or stdout, or no extension) the
/// summary. nullopt for any other extension.
std::optional<Emit> emitForOutput(llvm::StringRef outputPath);

/// The extensions emitForOutput knows, for an error message.
const char *outputExtensions();

} // namespace mist
