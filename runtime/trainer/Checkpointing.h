//===- Checkpointing.h - Saving and resuming training ---------------------===//
/// \file
/// A checkpoint is a folder, written by world rank 0: DIR/model.safetensors
/// holds the weights in the run's dtype (what one shares of a trained model)
/// and DIR/optimizer.safetensors their fp32 masters and Adam moments
/// (`.master`, `.adam_m`, `.adam_v`); both hold every parameter as its full
/// tensor in the canonical layout (a layer's as `layers.<l>.<name>`, with
/// the model's layer index) and the same metadata: the step, seed, model
/// and its layer count, precision, learning-rate schedule, the plan and the
/// data position, a hash of each of the file's tensors and the save they
/// belong to. A resume refuses a checkpoint of another shape of the model
/// (another layer count, or tensors the model does not have) by name, as it
/// refuses a tensor of another shape. A save writes
/// the model file under a temporary name, replaces the optimizer file, then
/// renames the model file: a save cut short leaves a pair a resume finds.
/// Resuming reads both; a folder of an older trainer (one
/// DIR/latest.safetensors with everything) still resumes.
/// Full tensors make it independent of the plan: resuming under any other
/// plan re-slices them with that plan's shard maps.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/checkpoint/CheckpointFormat.h"
#include "runtime/checkpoint/Safetensors.h"
#include "runtime/comm/ProcessGroups.h"
#include "runtime/trainer/LrSchedule.h"
#include "runtime/trainer/ParameterStore.h"

#include <map>
#include <optional>
#include <string>

namespace mist::rt {

/// Bytes of a checkpoint of the whole model: masters and both Adam moments
/// of every parameter in fp32, a tied weight once, and the weights twice
/// while a save replaces them (counted at fp32).
int64_t checkpointBytes(const TrainerSpec &spec);

/// Collective over the world: every stage gathers its tensors, the first
/// rank of each stage sends them to world rank 0 over `hostWorld` (the MPI
/// world: the tensors are host copies by then), which writes the folder
/// `dir`'s two files. A write failure ends the job (abortJob) with the
/// cause. `run`: more of the run for the metadata (the plan, where the data
/// stood: runRecord in Trainer.cpp).
void saveCheckpoint(const std::string &dir, const TrainerSpec &spec, ProcessGroups &groups,
                    Communicator &hostWorld, ParameterStore &store, int step, uint64_t seed,
                    const LrSchedule &schedule, const std::map<std::string, std::string> &run);

/// A checkpoint as one rank found it, before any of its tensors is used:
/// every rank opens it, the ranks compare what they found (the trainer's
/// resume agreement), and only then does each load its stage's part.
struct OpenedCheckpoint {
  /// This stage's tensors of both files (weights widened to F32) and the
  /// model file's metadata; else `error` says why not.
  std::optional<SafetensorsFile> file;
  std::string error;
  std::string source;                 ///< the file(s) read, for messages
  int step = 0;                       ///< written after this step
  std::optional<LrSchedule> schedule; ///< none in checkpoints older than the record
  /// Names this checkpoint among others of the model: a hash of its
  /// metadata, which holds the step, seed, schedule and (since the record)
  /// a hash of every tensor's bytes. Ranks that read different files see
  /// different identities.
  uint64_t identity = 0;
};

/// Reads and checks the checkpoint in folder `dir` (format, model, step,
/// schedule, the two files of one save); a missing, corrupt or mismatched
/// file comes back with `error` set, it does not end the job (the ranks
/// decide together).
/// Reads only `stage`'s tensors, each checked against the hash recorded for
/// it.
OpenedCheckpoint openCheckpoint(const std::string &dir, const TrainerSpec &spec,
                                const StageSpec &stage);

/// --init-from DIR: the weights of the checkpoint in folder `dir` for a new
/// run (its model file, and the fp32 masters of its optimizer file when
/// the folder holds one of the same save; mistc --emit=checkpoint --from-hf
/// writes a model file alone). Step, schedule and Adam moments are not
/// taken. A missing, corrupt or mismatched file comes back with `error`.
OpenedCheckpoint openInitialWeights(const std::string &dir, const TrainerSpec &spec,
                                    const StageSpec &stage);

/// Copies the opened initial weights of `stage` into this rank's parameters
/// (the masters from the optimizer file, else the weights) and zeroes the
/// Adam moments. A missing tensor or one of another shape ends the job.
void loadInitialWeights(const OpenedCheckpoint &ckpt, const StageSpec &stage,
                        ParameterStore &store);

/// Copies the opened checkpoint's tensors of `stage` into this rank's
/// parameters and optimizer state (before ParameterStore::settle). A missing
/// tensor or one of another shape ends the job with the cause.
void loadCheckpoint(const OpenedCheckpoint &ckpt, const StageSpec &stage, ParameterStore &store);

} // namespace mist::rt
