//===- Emit.cpp - What mistc writes (--emit) ------------------------------===//
#include "tools/mistc/Emit.h"

#include "llvm/Support/Path.h"

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
  case Emit::HuggingFace:
    return "hf";
  case Emit::Checkpoint:
    return "checkpoint";
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

std::optional<Emit> mist::emitForOutput(llvm::StringRef outputPath) {
  if (outputPath == "-")
    return Emit::Summary;
  llvm::StringRef ext = llvm::sys::path::extension(outputPath);
  if (ext == ".cu" || ext == ".cpp")
    return Emit::Trainer;
  if (ext == ".yaml" || ext == ".yml")
    return Emit::Plan;
  if (ext == ".mir")
    return Emit::IR;
  if (ext == ".json")
    return Emit::Timeline;
  if (ext == ".svg")
    return Emit::TimelineSvg;
  if (ext == ".txt" || ext.empty())
    return Emit::Summary;
  return std::nullopt;
}

const char *mist::outputExtensions() {
  return ".cu or .cpp (the trainer), .yaml (the tuned plan), .mir (the IR), .json (the predicted "
         "timeline), .svg (its picture), .txt (the summary)";
}
