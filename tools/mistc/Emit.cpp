//===- Emit.cpp - What mistc writes (--emit) ------------------------------===//
#include "tools/mistc/Emit.h"

using namespace mist;

const char *mist::emitName(Emit e) {
  switch (e) {
  case Emit::AST:
    return "ast";
  case Emit::IR:
    return "ir";
  case Emit::CostedIR:
    return "costed-ir";
  case Emit::Summary:
    return "summary";
  case Emit::Plan:
    return "plan";
  case Emit::Report:
    return "report";
  case Emit::Timeline:
    return "timeline";
  case Emit::Schedule:
    return "schedule";
  case Emit::Megatron:
    return "megatron";
  case Emit::DeepSpeed:
    return "deepspeed";
  case Emit::TorchTitan:
    return "torchtitan";
  case Emit::TimelineSvg:
    return "timeline-svg";
  case Emit::Lowered:
    return "lowered";
  case Emit::Trainer:
    return "trainer";
  case Emit::ProfileShapes:
    return "profile-shapes";
  }
  return "?";
}
