//===- CheckpointFolder.h - One checkpoint folder for all of a job's ranks ===//
/// \file
/// Rank 0 writes checkpoints; every rank reads the one it resumes from. On
/// several hosts that holds only when the folder is on a filesystem they
/// all mount: a node-local folder makes a save look fine and the resume
/// fail, and a host holding an older copy would resume its ranks from
/// another step. So, before the first step:
/// - a new run proves that every rank sees the folder rank 0 writes (rank 0
///   leaves a file with a token only this job knows, every rank reads it);
/// - a resumed run opens the checkpoint on every rank and compares what the
///   ranks found (step and identity) before any tensor is used.
/// Either ends the job with one message naming each rank's host and what
/// it found, instead of a hang or a silent mix of weights.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/comm/MpiCommunicator.h"
#include "runtime/trainer/Checkpointing.h"

#include <string>
#include <vector>

namespace mist::rt {

/// Rank 0 refuses a folder that holds a checkpoint unless resuming (a new
/// run does not overwrite one), creates `dir`, checks that it takes a file and
/// has room for `checkpointBytes`, and removes files that interrupted saves
/// left; then every rank checks that it sees the folder rank 0 writes (a
/// resume too: node-local copies of one checkpoint would drift apart). `hostOfRank` names each
/// world rank's host for messages. Collective over `world`.
void prepareCheckpointFolder(const std::string &dir, bool resume, int64_t checkpointBytes,
                             MpiCommunicator &world, const std::vector<std::string> &hostOfRank);

/// Every rank opens the checkpoint in folder `dir`; returns it when all found the same one,
/// else ends the job naming what each rank found. Collective over `world`.
/// `weightsOnly`: --init-from's weights (openInitialWeights), else --resume's checkpoint.
OpenedCheckpoint openCheckpointOnEveryRank(const std::string &dir, const TrainerSpec &spec,
                                           const StageSpec &stage, MpiCommunicator &world,
                                           const std::vector<std::string> &hostOfRank,
                                           bool weightsOnly = false);

} // namespace mist::rt
