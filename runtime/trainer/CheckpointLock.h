//===- CheckpointLock.h - One job at a time on a checkpoint folder ---------===//
/// \file
/// Two jobs saving into one checkpoint folder would replace each other's
/// checkpoints step by step. So rank 0 of a job holds DIR/.mistrt-lock
/// (created exclusively, naming its host, process and start) for as long
/// as the job runs, touches it after every step, and removes it at the end.
/// A second job finds it and stops at start, naming the holder. A job that
/// died (killed, aborted) leaves its lock behind; its successor takes it
/// over when the holder's process is gone (same host) or the lock has not
/// been touched for `staleSeconds` (another host, whose processes cannot be
/// seen), saying so.
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

namespace mist::rt {

class CheckpointLock {
public:
  /// How long a lock of another host may go untouched before it is taken
  /// as a dead job's: well above any step's time.
  static constexpr int staleSeconds = 15 * 60;

  CheckpointLock() = default;
  /// Takes the lock of folder `dir`, or ends the job (abortJob) naming the
  /// job that holds it.
  void acquire(const std::string &dir);
  /// After each step: the lock is still held.
  void touch();
  /// Gives it back (also on destruction); a job that ends abnormally leaves
  /// it for its successor to take over.
  void release();
  ~CheckpointLock() { release(); }
  CheckpointLock(const CheckpointLock &) = delete;
  CheckpointLock &operator=(const CheckpointLock &) = delete;

private:
  std::string path, holder; ///< the lock file, and what this job wrote in it
};

} // namespace mist::rt
