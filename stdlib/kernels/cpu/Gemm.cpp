//===- Gemm.cpp - Row-major sgemm over OpenBLAS, or plain loops -----------===//
#include "stdlib/kernels/cpu/Gemm.h"

#include <cstdio>
#include <cstdlib>

#ifdef MIST_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace mist::kernels::cpu {

namespace {

/// The fallback where OpenBLAS is missing (e.g. a GPU host that only builds
/// the CPU trainer to compare with), and empty products: i-k-j order, so the
/// inner loop runs along rows of B and C.
void gemmLoops(Trans transA, Trans transB, Index m, Index n, Index k, float alpha, const float *a,
               Index lda, const float *b, Index ldb, float beta, float *c, Index ldc) {
  for (Index i = 0; i < m; ++i) {
    float *ci = c + i * ldc;
    for (Index j = 0; j < n; ++j)
      ci[j] = beta == 0.f ? 0.f : beta * ci[j];
    for (Index p = 0; p < k; ++p) {
      float aip = alpha * (transA == Trans::Yes ? a[p * lda + i] : a[i * lda + p]);
      if (transB == Trans::No) {
        const float *bp = b + p * ldb;
        for (Index j = 0; j < n; ++j)
          ci[j] += aip * bp[j];
      } else {
        for (Index j = 0; j < n; ++j)
          ci[j] += aip * b[j * ldb + p];
      }
    }
  }
}

} // namespace

void gemm(Trans transA, Trans transB, Index m, Index n, Index k, float alpha, const float *a,
          Index lda, const float *b, Index ldb, float beta, float *c, Index ldc) {
  if (m <= 0 || n <= 0)
    return;
#ifdef MIST_HAVE_OPENBLAS
  if (k <= 0) // nothing to multiply, C = beta * C: the loops do just that
    return gemmLoops(transA, transB, m, n, 0, alpha, a, lda, b, ldb, beta, c, ldc);
  cblas_sgemm(CblasRowMajor, transA == Trans::Yes ? CblasTrans : CblasNoTrans,
              transB == Trans::Yes ? CblasTrans : CblasNoTrans, blasint(m), blasint(n), blasint(k),
              alpha, a, blasint(lda), b, blasint(ldb), beta, c, blasint(ldc));
#else
  gemmLoops(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}

const char *gemmBackend() {
#ifdef MIST_HAVE_OPENBLAS
  // e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64": the
  // version and the kernels it picked for this CPU.
  return openblas_get_config();
#else
  return "reference loops (OpenBLAS not found at build time)";
#endif
}

} // namespace mist::kernels::cpu
