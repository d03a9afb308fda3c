//===- Checkpointing.h - Saving and resuming training ---------------------===//
/// \file
/// A checkpoint is one safetensors file, DIR/latest.safetensors, written
/// atomically by world rank 0: every parameter as its full tensor in the
/// canonical layout (a layer's as `layers.<l>.<name>`, with the model's layer
/// index), its fp32 master copy and Adam moments beside it (`.master`,
/// `.adam_m`, `.adam_v`), and the step, seed, model and learning-rate
/// schedule, the plan and the data position in the metadata. Beside it,
/// DIR/model.safetensors holds the weights alone (in the run's dtype, the
/// same metadata): what one shares of a trained model, without its optimizer
/// state; resuming reads latest.safetensors only, one atomic file.
/// Full tensors make it independent of the plan: resuming under any other
/// plan re-slices them with that plan's shard maps.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/checkpoint/Safetensors.h"
#include "runtime/comm/ProcessGroups.h"
#include "runtime/trainer/LrSchedule.h"
#include "runtime/trainer/ParameterStore.h"

#include <map>
#include <optional>
#include <string>

namespace mist::rt {

/// Bytes of a checkpoint of the whole model: weights, masters and both Adam
/// moments of every parameter, fp32, a tied weight once, and the weights
/// again in model.safetensors (counted at fp32).
int64_t checkpointBytes(const TrainerSpec &spec);

/// Collective over the world: every stage gathers its tensors, the first
/// rank of each stage sends them to world rank 0 over `hostWorld` (the MPI
/// world: the tensors are host copies by then), which writes `path` and the
/// model file beside it. A write failure ends the job (abortJob) with the
/// cause. `run`: more of the run for the metadata (the plan, where the data
/// stood: runRecord in Trainer.cpp).
void saveCheckpoint(const std::string &path, const TrainerSpec &spec, ProcessGroups &groups,
                    Communicator &hostWorld, ParameterStore &store, int step, uint64_t seed,
                    const LrSchedule &schedule, const std::map<std::string, std::string> &run);

/// A checkpoint as one rank found it, before any of its tensors is used:
/// every rank opens it, the ranks compare what they found (the trainer's
/// resume agreement), and only then does each load its stage's part.
struct OpenedCheckpoint {
  std::optional<SafetensorsFile> file; ///< read and of this model; else `error` says why not
  std::string error;
  int step = 0;                       ///< written after this step
  std::optional<LrSchedule> schedule; ///< none in checkpoints older than the record
  /// Names this checkpoint among others of the model: a hash of its
  /// metadata, which holds the step, seed, schedule and (since the record)
  /// a hash of every tensor's bytes. Ranks that read different files see
  /// different identities.
  uint64_t identity = 0;
};

/// Reads and checks `path` (format, model, step, schedule); a missing,
/// corrupt or mismatched file comes back with `error` set, it does not end
/// the job (the ranks decide together).
/// Reads only `stage`'s tensors, each checked against the hash recorded for
/// it.
OpenedCheckpoint openCheckpoint(const std::string &path, const TrainerSpec &spec,
                                const StageSpec &stage);

/// Copies the opened checkpoint's tensors of `stage` into this rank's
/// parameters and optimizer state (before ParameterStore::settle). A missing
/// tensor or one of another shape ends the job with the cause.
void loadCheckpoint(const OpenedCheckpoint &ckpt, const std::string &path, const StageSpec &stage,
                    ParameterStore &store);

} // namespace mist::rt
