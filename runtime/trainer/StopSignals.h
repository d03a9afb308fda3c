//===- StopSignals.h - SIGTERM and SIGUSR1 end the run after its step ------===//
/// \file
/// Slurm asks a job to stop with a signal: `--signal=USR1@120` sends SIGUSR1
/// to every task two minutes before the time limit, and preemption sends
/// SIGTERM before SIGKILL. While a StopSignals object lives, either signal
/// only records that it came and has the rank say where it was (`mistrt:
/// rank R (host): SIGTERM during step S`, written from the handler); the
/// training loop asks every rank after each step (the ranks may not all get
/// it at the same moment), and the run then saves a checkpoint, when it has
/// a folder, and leaves cleanly, as Megatron-LM's --exit-signal-handler
/// does. When a rank dies, the launcher (mpirun, srun --kill-on-bad-exit)
/// names it and sends the others SIGTERM, then SIGKILL: each survivor's
/// line then tells the step it was in.
//===----------------------------------------------------------------------===//
#pragma once

#include <csignal>

namespace mist::rt {

class StopSignals {
public:
  /// Installs the handlers of SIGTERM and SIGUSR1 (the previous ones come
  /// back when the object goes) for world rank `rank`.
  explicit StopSignals(int rank);
  ~StopSignals();
  StopSignals(const StopSignals &) = delete;
  StopSignals &operator=(const StopSignals &) = delete;

  /// The run is in step `step` now (what a signal's line says).
  void atStep(int step);
  /// The signal that came since the object was made (SIGTERM or SIGUSR1), or 0.
  int received() const;

private:
  int rank;
  char host[64] = {};
  struct sigaction previousTerm {
  }, previousUsr1{};
};

} // namespace mist::rt
