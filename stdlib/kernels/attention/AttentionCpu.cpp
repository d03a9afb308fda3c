//===- AttentionCpu.cpp - Causal attention in query blocks over cpu::gemm -===//
#include "stdlib/kernels/attention/AttentionCpu.h"

#include "stdlib/kernels/cpu/Gemm.h"
#include "stdlib/kernels/cpu/Parallel.h"
#include "stdlib/kernels/cpu/VectorMath.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace mist::kernels {

using cpu::gemm;
using cpu::Trans;

namespace {

/// Query rows per block: a [64, seq] fp32 tile per thread (1 MiB at seq
/// 4096) and GEMMs long enough to run near the core's peak.
constexpr Index blockRows = 64;

struct Layout {
  const AttentionArgs &a;
  Index group(Index h) const { return h / (a.heads / a.kvHeads); }
  Index qAt(Index b, Index t, Index h) const { return (b * a.seq + t) * a.qStride + h * a.headDim; }
  Index kvAt(Index b, Index t, Index g) const {
    return (b * a.seq + t) * a.kvStride + g * a.headDim;
  }
  Index outAt(Index b, Index t, Index h) const {
    return ((b * a.seq + t) * a.heads + h) * a.headDim;
  }
  Index outStride() const { return a.heads * a.headDim; }
  /// Keys query t attends to; a block of rows [t0, t1) needs keysOfBlock.
  Index keys(Index t) const { return a.causal ? t + 1 : a.seq; }
  Index keysOfBlock(Index t1) const { return a.causal ? t1 : a.seq; }
  float scale() const { return 1.f / std::sqrt(float(a.headDim)); }
};

/// One row of scores: p = exp(s - max) over the first `keys` of `width`
/// entries, zero after them; returns max + log Σ p, and scales p to sum 1.
MIST_CPU_KERNEL float softmaxRow(float *p, Index keys, Index width) {
  float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
  for (Index s = 0; s < keys; ++s)
    mx = std::max(mx, p[s]);
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (Index s = 0; s < keys; ++s) {
    p[s] = cpu::fastExp(p[s] - mx);
    sum += p[s];
  }
  float inv = 1.f / sum;
#pragma omp simd
  for (Index s = 0; s < keys; ++s)
    p[s] *= inv;
#pragma omp simd
  for (Index s = keys; s < width; ++s)
    p[s] = 0.f;
  return mx + std::log(sum);
}

/// Backward of one row: p = exp(s - lse) (zero past `keys`), then in place
/// of the dp row ds = p * (dp - rowDot) * scale.
MIST_CPU_KERNEL void softmaxGradRow(float *p, float *dp, Index keys, Index width, float lse,
                                    float rowDot, float scale) {
#pragma omp simd
  for (Index s = 0; s < keys; ++s) {
    p[s] = cpu::fastExp(p[s] - lse);
    dp[s] = p[s] * (dp[s] - rowDot) * scale;
  }
#pragma omp simd
  for (Index s = keys; s < width; ++s)
    p[s] = dp[s] = 0.f;
}

MIST_CPU_KERNEL float dot(const float *x, const float *y, Index n) {
  float acc = 0.f;
#pragma omp simd reduction(+ : acc)
  for (Index d = 0; d < n; ++d)
    acc += x[d] * y[d];
  return acc;
}

} // namespace

void attentionFwdCpu(const AttentionArgs &a) {
  Layout w{a};
  const Index blocks = (a.seq + blockRows - 1) / blockRows;
  // One task per (batch, head, block of query rows): disjoint outputs.
  cpu::parallelFor(a.batch * a.heads * blocks, 1, [&](Index begin, Index end) {
    std::vector<float> scores(size_t(blockRows * a.seq));
    for (Index task = begin; task < end; ++task) {
      Index b = task / (a.heads * blocks), h = task / blocks % a.heads, blk = task % blocks;
      Index t0 = blk * blockRows, t1 = std::min(a.seq, t0 + blockRows), rows = t1 - t0;
      Index width = w.keysOfBlock(t1), g = w.group(h);
      // scores = scale * q k^T over the keys the block sees
      gemm(Trans::No, Trans::Yes, rows, width, a.headDim, w.scale(), a.q + w.qAt(b, t0, h),
           a.qStride, a.k + w.kvAt(b, 0, g), a.kvStride, 0.f, scores.data(), width);
      for (Index i = 0; i < rows; ++i)
        a.lse[(b * a.heads + h) * a.seq + t0 + i] =
            softmaxRow(scores.data() + i * width, w.keys(t0 + i), width);
      gemm(Trans::No, Trans::No, rows, a.headDim, width, 1.f, scores.data(), width,
           a.v + w.kvAt(b, 0, g), a.kvStride, 0.f, a.out + w.outAt(b, t0, h), w.outStride());
    }
  });
}

void attentionBwdCpu(const AttentionArgs &a) {
  Layout w{a};
  const Index perGroup = a.heads / a.kvHeads;
  // One task per (batch, key/value head): it owns dk and dv of that head and
  // dq of the query heads that read it.
  cpu::parallelFor(a.batch * a.kvHeads, 1, [&](Index begin, Index end) {
    std::vector<float> probs(size_t(blockRows * a.seq)), dprobs(size_t(blockRows * a.seq));
    for (Index task = begin; task < end; ++task) {
      Index b = task / a.kvHeads, g = task % a.kvHeads;
      for (Index t = 0; t < a.seq; ++t) {
        std::fill_n(a.dk + w.kvAt(b, t, g), a.headDim, 0.f);
        std::fill_n(a.dv + w.kvAt(b, t, g), a.headDim, 0.f);
      }
      for (Index h = g * perGroup; h < (g + 1) * perGroup; ++h)
        for (Index t0 = 0; t0 < a.seq; t0 += blockRows) {
          Index t1 = std::min(a.seq, t0 + blockRows), rows = t1 - t0, width = w.keysOfBlock(t1);
          const float *q = a.q + w.qAt(b, t0, h), *dout = a.dout + w.outAt(b, t0, h);
          const float *k = a.k + w.kvAt(b, 0, g), *v = a.v + w.kvAt(b, 0, g);
          gemm(Trans::No, Trans::Yes, rows, width, a.headDim, w.scale(), q, a.qStride, k,
               a.kvStride, 0.f, probs.data(), width);
          // dp = dout v^T
          gemm(Trans::No, Trans::Yes, rows, width, a.headDim, 1.f, dout, w.outStride(), v,
               a.kvStride, 0.f, dprobs.data(), width);
          for (Index i = 0; i < rows; ++i) {
            Index t = t0 + i;
            // Σ_d dout·out equals Σ_s p·dp, the softmax's correction term.
            float rowDot = dot(a.dout + w.outAt(b, t, h), a.out + w.outAt(b, t, h), a.headDim);
            softmaxGradRow(probs.data() + i * width, dprobs.data() + i * width, w.keys(t), width,
                           a.lse[(b * a.heads + h) * a.seq + t], rowDot, w.scale());
          }
          // dq = ds k; dk += ds^T q; dv += p^T dout
          gemm(Trans::No, Trans::No, rows, a.headDim, width, 1.f, dprobs.data(), width, k,
               a.kvStride, 0.f, a.dq + w.qAt(b, t0, h), a.qStride);
          gemm(Trans::Yes, Trans::No, width, a.headDim, rows, 1.f, dprobs.data(), width, q,
               a.qStride, 1.f, a.dk + w.kvAt(b, 0, g), a.kvStride);
          gemm(Trans::Yes, Trans::No, width, a.headDim, rows, 1.f, probs.data(), width, dout,
               w.outStride(), 1.f, a.dv + w.kvAt(b, 0, g), a.kvStride);
        }
    }
  });
}

} // namespace mist::kernels
