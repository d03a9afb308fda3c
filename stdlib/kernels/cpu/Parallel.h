//===- Parallel.h - Static splits of a range over the kernels' threads ----===//
/// \file
/// parallelFor(n, grain, body) calls body(begin, end) on contiguous pieces
/// of [0, n), one per thread (Threads.h), or once on the whole range when
/// n <= grain, when one thread is set, or inside another parallel region.
/// The split depends only on n and the thread count, and every kernel
/// writes each output from one piece only, so results repeat run to run.
/// The bodies are where vectorized loops live (MIST_CPU_KERNEL functions
/// take a range): OpenMP regions and per-CPU function variants stay apart.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/Tensor.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace mist::kernels::cpu {

template <class Body> void parallelFor(Index n, Index grain, Body &&body) {
  if (n <= 0)
    return;
#ifdef _OPENMP
  if (n > grain && omp_get_max_threads() > 1 && !omp_in_parallel()) {
#pragma omp parallel
    {
      Index threads = omp_get_num_threads(), t = omp_get_thread_num();
      Index begin = n * t / threads, end = n * (t + 1) / threads;
      if (begin < end)
        body(begin, end);
    }
    return;
  }
#else
  (void)grain;
#endif
  body(Index(0), n);
}

} // namespace mist::kernels::cpu
