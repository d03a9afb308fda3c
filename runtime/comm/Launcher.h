//===- Launcher.h - Which program started the job, and how to ask it ------===//
/// \file
/// Messages that tell a user how to launch or place ranks should speak the
/// launcher they used: `mpirun -np 2` means nothing to someone under `srun`.
/// The launcher is recognised from the environment it gives its ranks (Open
/// MPI's mpirun/mpiexec, Slurm's srun, MPICH's Hydra); where none is found
/// (a binary started alone) the messages name the common ones.
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <string>

namespace mist::rt {

enum class LauncherKind {
  OpenMpi, ///< Open MPI's mpirun / mpiexec (ORTE or PRRTE)
  Slurm,   ///< srun, direct launch over PMIx or PMI
  Hydra,   ///< MPICH's / Intel MPI's mpiexec.hydra
  Unknown  ///< started alone, or by something not recognised
};

struct Launcher {
  LauncherKind kind = LauncherKind::Unknown;

  /// "mpirun (Open MPI)", "srun (Slurm)", "mpiexec (Hydra)", "no launcher recognised".
  std::string name() const;
  /// How to start `ranks` ranks of `program` with this launcher, e.g.
  /// "srun -n 4 --mpi=pmix ./train"; for Unknown, the common ways.
  std::string launchCommand(int ranks, const std::string &program = "./train") const;
  /// The option that puts `perHost` consecutive ranks on each host (so a tp
  /// group or a stage stays on one node), e.g. "--map-by ppr:8:node".
  std::string packOption(int perHost) const;
};

/// The launcher of this process, read from `getEnv` (std::getenv by default;
/// tests pass a table).
Launcher detectLauncher(const std::function<const char *(const char *)> &getEnv = {});

} // namespace mist::rt
