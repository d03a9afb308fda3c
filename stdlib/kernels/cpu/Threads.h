//===- Threads.h - How many threads the fast CPU kernels use --------------===//
/// \file
/// One setting per process (a trainer rank): the fast kernels split rows,
/// heads and GEMMs over this many OpenMP threads. The trainer sets it from
/// `--threads` (default 1, so ranks started by mpirun do not oversubscribe
/// the cores); results are the same from run to run for a fixed count.
/// Built without OpenMP, the kernels run on one thread whatever is set.
//===----------------------------------------------------------------------===//
#pragma once

namespace mist::kernels::cpu {

void setCpuThreads(int threads);
int cpuThreads();

} // namespace mist::kernels::cpu
