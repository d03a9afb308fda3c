//===- Emit.h - What mistc writes (--emit) --------------------------------===//
/// \file
/// The one list of mistc's outputs: the driver parses --emit into it and
/// the plan actions (PlanActions.h) write the ones that act on a plan.
//===----------------------------------------------------------------------===//
#pragma once

namespace mist {

enum class Emit {
  // From the module alone.
  AST,
  IR,
  CostedIR,
  Summary,
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

} // namespace mist
