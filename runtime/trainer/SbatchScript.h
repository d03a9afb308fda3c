//===- SbatchScript.h - A Slurm batch script for this trainer's plan ------===//
/// \file
/// `train --print-sbatch [flags]` prints a batch script that runs the
/// trainer as its plan needs: as many nodes as the plan's ranks fill at the
/// cluster's GPUs per node, consecutive ranks per node (so tp groups and
/// stages stay where the plan put them), `srun --mpi=pmix`, and the other
/// flags of the command line passed on. docs/launch.md explains each line.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/trainer/Options.h"
#include "runtime/trainer/Trainer.h"

#include <string>

namespace mist::rt {

/// The script for `spec`, run as `argv` (whose --print-sbatch is left out).
/// `gpus`: a GPU build (asks Slurm for the GPUs).
std::string sbatchScript(const TrainerSpec &spec, const Options &o, int argc, char **argv,
                         bool gpus);

} // namespace mist::rt
