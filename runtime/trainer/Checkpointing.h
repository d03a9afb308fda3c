//===- Checkpointing.h - Saving and resuming training ---------------------===//
/// \file
/// A checkpoint is one safetensors file, DIR/latest.safetensors, written
/// atomically by world rank 0: every parameter as its full tensor in the
/// canonical layout (a layer's as `layers.<l>.<name>`, with the model's layer
/// index), its fp32 master copy and Adam moments beside it (`.master`,
/// `.adam_m`, `.adam_v`), and the step, seed, model and learning-rate
/// schedule in the metadata.
/// Full tensors make it independent of the plan: resuming under any other
/// plan re-slices them with that plan's shard maps.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/comm/ProcessGroups.h"
#include "runtime/trainer/ParameterStore.h"

#include <optional>
#include <string>

namespace mist::rt {

/// Collective over the world: every stage gathers its tensors, the first
/// rank of each stage sends them to world rank 0 over `hostWorld` (the MPI
/// world: the tensors are host copies by then), which writes `path`.
/// A write failure ends the job (abortJob) with the cause.
/// Bytes of a checkpoint of the whole model: weights, masters and both Adam
/// moments of every parameter, fp32, a tied weight once.
int64_t checkpointBytes(const TrainerSpec &spec);

/// The learning-rate schedule of a run (peak lr, linear warmup, cosine to a
/// tenth of lr at `totalSteps`): part of the run, so a checkpoint records it
/// and a resumed run continues it.
struct LrSchedule {
  float lr = 0;
  int warmupSteps = 0, totalSteps = 0;
  bool operator==(const LrSchedule &) const = default;
  float at(int step) const; ///< the lr of `step` (the floor after totalSteps)
  std::string str() const;  ///< "lr 0.001, warmup 0, 8 steps"
};

void saveCheckpoint(const std::string &path, const TrainerSpec &spec, ProcessGroups &groups,
                    Communicator &hostWorld, ParameterStore &store, int step, uint64_t seed,
                    const LrSchedule &schedule);

/// What a checkpoint says of the run that wrote it.
struct CheckpointState {
  int step = 0;                       ///< written after this step
  std::optional<LrSchedule> schedule; ///< none in checkpoints older than the record
};

/// Reads `path` into this rank's parameters and optimizer state (before
/// ParameterStore::settle). A missing, corrupt or mismatched checkpoint ends
/// the job with the cause.
CheckpointState loadCheckpoint(const std::string &path, const TrainerSpec &spec,
                               const StageSpec &stage, ParameterStore &store);

} // namespace mist::rt
