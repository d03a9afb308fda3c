//===- TrainerHeaders.h - Everything an emitted train.cu includes ---------===//
/// \file
/// The headers an emitted train.cu includes (backend/trainer/TrainerEmitter.cpp),
/// in one file so that the build tree can precompile them:
/// scripts/compile-trainer.sh and build-trainer.sh force-include this file
/// from BUILD/trainer-pch/ON/, where runtime/trainer/CMakeLists.txt puts a
/// precompiled copy for -O0 and -O2 (train.cu's own includes are then no-ops).
/// Compiling train.cu without it gives the same program, more slowly.
//===----------------------------------------------------------------------===//
// A guard, not #pragma once: the precompiled copy is compiled as a main file.
#ifndef MIST_RUNTIME_TRAINER_TRAINERHEADERS_H
#define MIST_RUNTIME_TRAINER_TRAINERHEADERS_H

#include "runtime/ops/Ops.h"
#include "runtime/trainer/StageRunner.h"
#include "runtime/trainer/TpContext.h"
#include "runtime/trainer/Trainer.h"

#endif // MIST_RUNTIME_TRAINER_TRAINERHEADERS_H
