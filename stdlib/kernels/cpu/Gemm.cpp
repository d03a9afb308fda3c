//===- Gemm.cpp - Row-major sgemm over oneDNN, or plain loops -------------===//
#include "stdlib/kernels/cpu/Gemm.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#ifdef MIST_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

namespace mist::kernels::cpu {

namespace {

/// The fallback where oneDNN is missing (e.g. a GPU host that only builds
/// the CPU trainer to compare with): i-k-j order, so the inner loop runs
/// along rows of B and C.
[[maybe_unused]] void gemmLoops(Trans transA, Trans transB, Index m, Index n, Index k, float alpha,
                                const float *a, Index lda, const float *b, Index ldb, float beta,
                                float *c, Index ldc) {
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

#ifdef MIST_HAVE_DNNL
void dnnlGemm(char transA, char transB, Index m, Index n, Index k, float alpha, const float *a,
              Index lda, const float *b, Index ldb, float beta, float *c, Index ldc) {
  dnnl_status_t status = dnnl_sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  if (status != dnnl_success) {
    // Only invalid arguments fail; the kernels pass valid ones, so this is a bug.
    std::fprintf(stderr, "mist: oneDNN sgemm failed (status %d) for m=%lld n=%lld k=%lld\n",
                 int(status), (long long)m, (long long)n, (long long)k);
    std::abort();
  }
}
#endif

} // namespace

void gemm(Trans transA, Trans transB, Index m, Index n, Index k, float alpha, const float *a,
          Index lda, const float *b, Index ldb, float beta, float *c, Index ldc) {
  if (m <= 0 || n <= 0)
    return;
  if (k <= 0) { // nothing to multiply: C = beta * C
    for (Index i = 0; i < m; ++i)
      for (Index j = 0; j < n; ++j)
        c[i * ldc + j] = beta == 0.f ? 0.f : beta * c[i * ldc + j];
    return;
  }
#ifdef MIST_HAVE_DNNL
  if (transA == Trans::Yes && transB == Trans::No && m > n) {
    // oneDNN 2.6's sgemm runs A^T B at half speed when A^T has more rows
    // than B has columns (a weight gradient x^T dy of a layer that narrows,
    // e.g. 1024 -> 256: 30 GFLOP/s where the other products run at 60 on
    // one AVX2 core; bench/results/cpu-vs-pytorch.json's machine). Its
    // transpose, B^T A, does not: compute that into scratch and add it back
    // transposed (a pass over m*n floats against 2*m*n*k flops).
    thread_local std::vector<float> scratch;
    scratch.resize(size_t(m * n));
    dnnlGemm('T', 'N', n, m, k, 1.f, b, ldb, a, lda, 0.f, scratch.data(), m);
    for (Index i = 0; i < m; ++i) {
      float *ci = c + i * ldc;
      for (Index j = 0; j < n; ++j)
        ci[j] = alpha * scratch[size_t(j * m + i)] + (beta == 0.f ? 0.f : beta * ci[j]);
    }
    return;
  }
  dnnlGemm(transA == Trans::Yes ? 'T' : 'N', transB == Trans::Yes ? 'T' : 'N', m, n, k, alpha, a,
           lda, b, ldb, beta, c, ldc);
#else
  gemmLoops(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
}

const char *gemmBackend() {
#ifdef MIST_HAVE_DNNL
  static const std::string name = [] {
    const dnnl_version_t *v = dnnl_version();
    return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
           std::to_string(v->patch);
  }();
  return name.c_str();
#else
  return "reference loops (oneDNN not found at build time)";
#endif
}

} // namespace mist::kernels::cpu
