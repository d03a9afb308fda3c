//===- Gemm.h - The one matrix product of the fast CPU kernels -------------===//
/// \file
/// Every fast CPU kernel multiplies matrices through this function: a
/// row-major single-precision GEMM with leading dimensions, so kernels can
/// multiply strided views (one head of a fused qkv buffer, a block of rows)
/// without copying. It runs OpenBLAS's cblas_sgemm (its OpenMP build, so
/// it splits work over the threads set by setCpuThreads (Threads.h) and runs
/// on one thread inside the kernels' own parallel loops) where the build
/// found it (CMake: MIST_HAVE_OPENBLAS), else a plain loop nest that is
/// correct and slow; `gemmBackend()` says which, for the trainer's start-up
/// line. For a fixed thread count its results are the same run to run.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/Tensor.h"

namespace mist::kernels::cpu {

enum class Trans : bool { No = false, Yes = true };

/// C[m, n] = alpha * op(A)[m, k] * op(B)[k, n] + beta * C, every matrix
/// row-major; op(X) is X or its transpose. lda, ldb, ldc: floats between
/// consecutive rows of A, B and C as stored. beta = 0 overwrites C (NaNs in
/// C do not propagate).
void gemm(Trans transA, Trans transB, Index m, Index n, Index k, float alpha, const float *a,
          Index lda, const float *b, Index ldb, float beta, float *c, Index ldc);

/// OpenBLAS's configuration string (version and kernels) or "reference loops".
const char *gemmBackend();

} // namespace mist::kernels::cpu
