//===- Checkpointing.h - Saving and resuming training ---------------------===//
/// \file
/// A checkpoint is one safetensors file, DIR/latest.safetensors, written
/// atomically by world rank 0: every parameter as its full tensor in the
/// canonical layout (a layer's as `layers.<l>.<name>`, with the model's layer
/// index), its fp32 master copy and Adam moments beside it (`.master`,
/// `.adam_m`, `.adam_v`), and the step, seed and model in the metadata.
/// Full tensors make it independent of the plan: resuming under any other
/// plan re-slices them with that plan's shard maps.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/comm/ProcessGroups.h"
#include "runtime/trainer/ParameterStore.h"

namespace mist::rt {

/// Collective over the world: every stage gathers its tensors, the first
/// rank of each stage sends them to world rank 0 over `hostWorld` (the MPI
/// world: the tensors are host copies by then), which writes `path`.
/// A write failure ends the job (abortJob) with the cause.
/// Bytes of a checkpoint of the whole model: weights, masters and both Adam
/// moments of every parameter, fp32, a tied weight once.
int64_t checkpointBytes(const TrainerSpec &spec);

void saveCheckpoint(const std::string &path, const TrainerSpec &spec, ProcessGroups &groups,
                    Communicator &hostWorld, ParameterStore &store, int step, uint64_t seed);

/// Reads `path` into this rank's parameters and optimizer state (before
/// ParameterStore::settle) and returns the step it was written after. A
/// missing, corrupt or mismatched checkpoint ends the job with the cause.
int loadCheckpoint(const std::string &path, const TrainerSpec &spec, const StageSpec &stage,
                   ParameterStore &store);

} // namespace mist::rt
