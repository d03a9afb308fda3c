//===- CpuInterference.h - Stream interference on a CPU rank --------------===//
/// \file
/// The interference table of mist-profile-cpu --overlap: the four streams as
/// the trainer's --overlap runs them on a CPU rank, each on a thread, the
/// same sets and factors as on a GPU (Interference.h). Workloads:
///
///   compute  an fp32 GEMM through the trainer's CPU op (ops::linear, 512^3)
///   g2g      a copy within host memory (64 MiB): MPI moves a collective's
///            bytes between ranks of one host through shared memory
///   h2d      a copy within host memory (64 MiB): offloading on a CPU rank
///   d2h      the same, other buffers
///
/// Each unit's time alone is the median of N runs; for a set, every stream
/// repeats its unit for about `targetMs` after a common start, and its
/// factor is interferenceFactors' (InterferenceFactors.h). On a host with
/// fewer cores than busy streams the threads share cores, which is what the
/// trainer's streams would do there too.
//===----------------------------------------------------------------------===//
#pragma once

#include "tools/profiler/Interference.h"

#include <functional>

namespace mist::profiler {

struct CpuInterferenceOptions {
  int warmup = 2, repeats = 9;
  double targetMs = 200; ///< how long each set runs
  int64_t gemmSize = 512;
  size_t copyBytes = size_t(64) << 20;
  /// Called before each timing (a unit alone, a set): under mpirun a
  /// barrier, so that every rank times the same streams at once, as the
  /// trainer's ranks run theirs on the node's shared cores. Empty: alone.
  std::function<void()> together;
};

InterferenceResult measureCpuInterference(const CpuInterferenceOptions &opts);

/// The table without --overlap, not timed: the trainer then runs every
/// stream's work on the rank's one thread, one piece after another in
/// program order, so while k streams have work each advances at 1/k of its
/// speed alone (factor k for every stream of a k-stream set) and the time
/// of the set is the sum of their times, as in the trainer (a dp gradient
/// reduction or an offload copy adds to the compute beside it).
InterferenceResult streamsInTurn();

} // namespace mist::profiler
