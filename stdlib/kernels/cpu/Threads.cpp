//===- Threads.cpp - The fast CPU kernels' thread count -------------------===//
#include "stdlib/kernels/cpu/Threads.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace mist::kernels::cpu {

// OpenMP's own per-process setting is the one place the count lives: OpenBLAS
// reads it too.
void setCpuThreads(int threads) {
#ifdef _OPENMP
  omp_set_num_threads(threads < 1 ? 1 : threads);
#else
  (void)threads;
#endif
}

int cpuThreads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

} // namespace mist::kernels::cpu
