//===- StopSignals.cpp - SIGTERM and SIGUSR1 end the run after its step ----===//
#include "runtime/trainer/StopSignals.h"

#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace mist::rt {

namespace {
// A signal handler can reach only static storage, and may only write
// sig_atomic_t there and call async-signal-safe functions (write). The
// line a signal prints is prepared before, in two buffers: the handler
// reads the one `currentLine` names while the other is rewritten.
volatile std::sig_atomic_t lastStopSignal = 0;
volatile std::sig_atomic_t currentLine = 0;
char lines[2][2][256]; // [buffer][SIGTERM, SIGUSR1]

void recordStop(int signal) {
  lastStopSignal = signal;
  const char *line = lines[currentLine][signal == SIGUSR1 ? 1 : 0];
  if (const size_t n = std::strlen(line); n > 0)
    (void)!write(STDERR_FILENO, line, n);
}
} // namespace

StopSignals::StopSignals(int rank) : rank(rank) {
  lastStopSignal = 0;
  if (gethostname(host, sizeof host - 1) != 0)
    std::snprintf(host, sizeof host, "?");
  atStep(0);
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

void StopSignals::atStep(int step) {
  const int next = 1 - int(currentLine);
  for (int kind = 0; kind < 2; ++kind)
    std::snprintf(lines[next][kind], sizeof lines[next][kind],
                  "mistrt: rank %d (%s): %s during step %d: the run stops after it, saved when "
                  "it has --ckpt-dir (unless the launcher ends it first: a rank that died)\n",
                  rank, host, kind == 0 ? "SIGTERM" : "SIGUSR1", step);
  currentLine = next;
}

int StopSignals::received() const { return int(lastStopSignal); }

} // namespace mist::rt
