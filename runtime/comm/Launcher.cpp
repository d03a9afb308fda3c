//===- Launcher.cpp - Which program started the job, and how to ask it ----===//
#include "runtime/comm/Launcher.h"

#include <cstdlib>

namespace mist::rt {

std::string Launcher::name() const {
  switch (kind) {
  case LauncherKind::OpenMpi:
    return "mpirun (Open MPI)";
  case LauncherKind::Slurm:
    return "srun (Slurm)";
  case LauncherKind::Hydra:
    return "mpiexec (Hydra)";
  case LauncherKind::Unknown:
    break;
  }
  return "no launcher recognised";
}

std::string Launcher::launchCommand(int ranks, const std::string &program) const {
  const std::string n = std::to_string(ranks);
  switch (kind) {
  case LauncherKind::OpenMpi:
    return "mpirun -np " + n + " " + program;
  case LauncherKind::Slurm:
    return "srun -n " + n + " --mpi=pmix " + program;
  case LauncherKind::Hydra:
    return "mpiexec -n " + n + " " + program;
  case LauncherKind::Unknown:
    break;
  }
  return "launch " + n + " ranks, e.g. mpirun -np " + n + " " + program + " or srun -n " + n +
         " --mpi=pmix " + program;
}

std::string Launcher::packOption(int perHost) const {
  const std::string g = std::to_string(perHost);
  switch (kind) {
  case LauncherKind::OpenMpi:
    return "mpirun --map-by ppr:" + g + ":node (or hosts with " + g +
           " slots each and the default --map-by slot; not --map-by node)";
  case LauncherKind::Slurm:
    return "srun --ntasks-per-node=" + g + " --distribution=block (not cyclic)";
  case LauncherKind::Hydra:
    return "mpiexec -ppn " + g;
  case LauncherKind::Unknown:
    break;
  }
  return "consecutive ranks on one host, " + g + " per host: mpirun --map-by ppr:" + g +
         ":node, or srun --ntasks-per-node=" + g + " --distribution=block";
}

Launcher detectLauncher(const std::function<const char *(const char *)> &getEnv) {
  auto has = [&](const char *name) {
    const char *v = getEnv ? getEnv(name) : std::getenv(name);
    return v && *v;
  };
  // Open MPI's daemons tell their ranks where mpirun is (ORTE in 4.x, PRRTE
  // in 5.x); under srun's direct launch there is no such daemon. mpirun
  // inside an sbatch allocation also sees SLURM_* variables, so it is
  // tested first.
  if (has("OMPI_MCA_orte_hnp_uri") || has("PRTE_LAUNCHED") || has("OMPI_MCA_prte_hnp_uri"))
    return {LauncherKind::OpenMpi};
  if (has("SLURM_STEP_ID") && has("SLURM_PROCID"))
    return {LauncherKind::Slurm};
  if (has("OMPI_COMM_WORLD_SIZE")) // set by Open MPI's launchers only
    return {LauncherKind::OpenMpi};
  if (has("HYDI_CONTROL_FD") || has("PMI_RANK"))
    return {LauncherKind::Hydra};
  return {LauncherKind::Unknown};
}

} // namespace mist::rt
