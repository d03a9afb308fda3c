//===- StopSignals.cpp - SIGTERM and SIGUSR1 end the run after its step ----===//
#include "runtime/trainer/StopSignals.h"

namespace mist::rt {

namespace {
// A signal handler can reach only static storage, and only this type is
// safe to write there.
volatile std::sig_atomic_t lastStopSignal = 0;

void recordStop(int signal) { lastStopSignal = signal; }
} // namespace

StopSignals::StopSignals() {
  lastStopSignal = 0;
  struct sigaction action {};
  action.sa_handler = recordStop;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART; // the MPI and file calls under way go on
  sigaction(SIGTERM, &action, &previousTerm);
  sigaction(SIGUSR1, &action, &previousUsr1);
}

StopSignals::~StopSignals() {
  sigaction(SIGTERM, &previousTerm, nullptr);
  sigaction(SIGUSR1, &previousUsr1, nullptr);
}

int StopSignals::received() const { return int(lastStopSignal); }

} // namespace mist::rt
