//===- AbortJobProgram.cpp - A job in which one rank gives up -------------===//
/// \file
/// `AbortJobProgram MODE` under mpirun: rank 1 fails in the way MODE names,
/// while every other rank waits in a barrier that can only end if rank 1
/// joins. The job must stop within seconds with `mistrt: rank 1: ...` on
/// stderr and a non-zero status (tests/runtime/comm/ExpectJobFailure.cmake).
/// Modes: `abort` (abortJob), `mpi-error` (an MPI call that fails: a send
/// to a rank that does not exist), `exception` (an uncaught exception),
/// `short-message` (rank 0 sends 4 bytes where rank 1 expects 8).
//===----------------------------------------------------------------------===//
#include "runtime/comm/MpiCommunicator.h"

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

using namespace mist::rt;

int main(int argc, char **argv) {
  MpiRuntime mpi(argc, argv);
  std::unique_ptr<MpiCommunicator> world = MpiCommunicator::world();
  std::string mode = argc > 1 ? argv[1] : "";
  int value = 0;
  if (world->rank() == 0 && mode == "short-message")
    world->send(&value, sizeof value, /*peer=*/1, /*tag=*/0);
  if (world->rank() == 1) {
    if (mode == "abort")
      abortJob("deliberate abort from the test");
    if (mode == "mpi-error")
      world->send(&value, sizeof value, /*peer=*/world->size() + 5, /*tag=*/0);
    if (mode == "exception")
      throw std::runtime_error("deliberate exception from the test");
    if (mode == "short-message") {
      int64_t wider = 0;
      world->recv(&wider, sizeof wider, /*peer=*/0, /*tag=*/0);
    }
    abortJob("unknown mode '" + mode + "' (abort, mpi-error, exception, short-message)");
  }
  world->barrier();
  std::printf("rank %d: the barrier ended, but rank 1 should have stopped the job\n",
              world->rank());
  return 0;
}
