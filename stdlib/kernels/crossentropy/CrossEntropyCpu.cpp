//===- CrossEntropyCpu.cpp - Vectorized cross-entropy rows ----------------===//
#include "stdlib/kernels/crossentropy/CrossEntropyCpu.h"

#include "stdlib/kernels/cpu/Parallel.h"
#include "stdlib/kernels/cpu/VectorMath.h"

#include <algorithm>
#include <cmath>

namespace mist::kernels {

namespace {

MIST_CPU_KERNEL void rowMax(const CrossEntropyArgs &a, Index begin, Index end) {
  for (Index n = begin; n < end; ++n) {
    const float *logits = a.logits + n * a.vocab;
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (Index v = 0; v < a.vocab; ++v)
      mx = std::max(mx, logits[v]);
    a.rowMax[n] = mx;
  }
}

MIST_CPU_KERNEL void rowSums(const CrossEntropyArgs &a, Index begin, Index end) {
  for (Index n = begin; n < end; ++n) {
    const float *logits = a.logits + n * a.vocab;
    const float mx = a.rowMax[n];
    float sum = 0.f;
#pragma omp simd reduction(+ : sum)
    for (Index v = 0; v < a.vocab; ++v)
      sum += cpu::fastExp(logits[v] - mx);
    a.sumExp[n] = sum;
    Index t = Index(a.targets[n]) - a.vocabStart;
    a.targetLogit[n] = t >= 0 && t < a.vocab ? logits[t] : 0.f;
  }
}

MIST_CPU_KERNEL void rowGrads(const CrossEntropyArgs &a, Index begin, Index end) {
  const float scale = a.dloss / float(a.totalRows);
  for (Index n = begin; n < end; ++n) {
    const float *logits = a.logits + n * a.vocab;
    float *dlogits = a.dlogits + n * a.vocab;
    const float mx = a.rowMax[n], factor = scale / a.sumExp[n];
#pragma omp simd
    for (Index v = 0; v < a.vocab; ++v)
      dlogits[v] = cpu::fastExp(logits[v] - mx) * factor;
    Index t = Index(a.targets[n]) - a.vocabStart;
    if (t >= 0 && t < a.vocab)
      dlogits[t] -= scale;
  }
}

template <class Kernel> void splitRows(const CrossEntropyArgs &a, Kernel kernel) {
  cpu::parallelFor(a.rows, 8, [&](Index begin, Index end) { kernel(a, begin, end); });
}

} // namespace

void crossEntropyMaxCpu(const CrossEntropyArgs &a) { splitRows(a, rowMax); }
void crossEntropySumCpu(const CrossEntropyArgs &a) { splitRows(a, rowSums); }
void crossEntropyBwdCpu(const CrossEntropyArgs &a) { splitRows(a, rowGrads); }

} // namespace mist::kernels
