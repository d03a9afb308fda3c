//===- CpuOps.cpp - The IR's ops on CPU ranks, over the reference kernels -===//
#include "runtime/ops/Ops.h"

#include "stdlib/kernels/adamw/AdamW.h"

#include "stdlib/kernels/activation/Activation.h"
#include "stdlib/kernels/attention/Attention.h"
#include "stdlib/kernels/crossentropy/CrossEntropy.h"
#include "stdlib/kernels/embedding/Embedding.h"
#include "stdlib/kernels/layernorm/LayerNorm.h"
#include "stdlib/kernels/linear/Linear.h"
#include "stdlib/kernels/rmsnorm/RMSNorm.h"
#include "stdlib/kernels/rope/Rope.h"
#include <algorithm>
#include <cmath>
#include <vector>

namespace k = mist::kernels;

namespace mist::rt::ops {

void embedding(float *out, const int32_t *ids, const float *table, Index tokens, Index channels,
               Index vocab, Index vocabStart) {
  k::embeddingFwdRef({out, ids, table, nullptr, nullptr, tokens, channels, vocab, vocabStart});
}

void embeddingGrad(float *dtable, const float *dout, const int32_t *ids, Index tokens,
                   Index channels, Index vocab, Index vocabStart) {
  k::embeddingBwdRef({nullptr, ids, nullptr, dtable, dout, tokens, channels, vocab, vocabStart});
}

void positionEmbedding(float *out, const float *table, Index batch, Index seq, Index channels) {
  k::positionEmbeddingFwdRef({out, table, nullptr, nullptr, batch, seq, channels});
}

void positionEmbeddingGrad(float *dtable, const float *dout, Index batch, Index seq,
                           Index channels) {
  k::positionEmbeddingBwdRef({nullptr, nullptr, dtable, dout, batch, seq, channels});
}

void add(float *out, const float *a, const float *b, Index n) {
  for (Index i = 0; i < n; ++i)
    out[i] = a[i] + b[i];
}

void copy(float *out, const float *in, Index n) {
  for (Index i = 0; i < n; ++i)
    out[i] = in[i];
}

void layerNorm(float *out, float *stats, const float *x, const float *weight, const float *bias,
               Index rows, Index channels, float eps) {
  std::vector<float> mean(rows), rstd(rows);
  k::layerNormFwdRef({out, mean.data(), rstd.data(), x, weight, bias, nullptr, nullptr, nullptr,
                      nullptr, rows, channels, eps});
  for (Index n = 0; n < rows; ++n) {
    stats[2 * n] = mean[n];
    stats[2 * n + 1] = rstd[n];
  }
}

void layerNormGrad(float *dx, float *dweight, float *dbias, const float *dout, const float *x,
                   const float *weight, const float *stats, Index rows, Index channels) {
  std::vector<float> mean(rows), rstd(rows);
  for (Index n = 0; n < rows; ++n) {
    mean[n] = stats[2 * n];
    rstd[n] = stats[2 * n + 1];
  }
  k::layerNormBwdRef({nullptr, mean.data(), rstd.data(), x, weight, nullptr, dx, dweight, dbias,
                      dout, rows, channels, 0.f});
}

void rmsNorm(float *out, float *stats, const float *x, const float *weight, Index rows,
             Index channels, float eps) {
  k::rmsNormFwdRef({out, stats, x, weight, nullptr, nullptr, nullptr, rows, channels, eps});
}

void rmsNormGrad(float *dx, float *dweight, const float *dout, const float *x, const float *weight,
                 const float *stats, Index rows, Index channels) {
  k::rmsNormBwdRef(
      {nullptr, const_cast<float *>(stats), x, weight, dx, dweight, dout, rows, channels, 0.f});
}

void linear(float *out, const float *x, const float *weight, const float *bias, Index rows,
            Index in, Index outF) {
  k::linearFwdRef({out, x, weight, bias, nullptr, nullptr, nullptr, nullptr, rows, in, outF});
}

void linearGrad(float *dx, float *dweight, float *dbias, const float *dout, const float *x,
                const float *weight, Index rows, Index in, Index outF) {
  k::linearBwdRef({nullptr, x, weight, nullptr, dx, dweight, dbias, dout, rows, in, outF});
}

void lmHead(float *logits, const float *x, const float *table, Index rows, Index channels,
            Index vocab) {
  k::lmHeadFwdRef(logits, x, table, rows, channels, vocab);
}

void lmHeadGrad(float *dx, float *dtable, const float *dlogits, const float *x, const float *table,
                Index rows, Index channels, Index vocab) {
  k::lmHeadBwdRef(dx, dtable, dlogits, x, table, rows, channels, vocab);
}

void attention(float *out, float *lse, const float *q, const float *k, const float *v,
               Index qStride, Index kvStride, const AttentionShape &s) {
  k::attentionFwdRef({out, lse, q, k, v, nullptr, nullptr, nullptr, nullptr, s.batch, s.seq,
                      s.heads, s.kvHeads, s.headDim, qStride, kvStride, s.causal});
}

void attentionGrad(float *dq, float *dk, float *dv, const float *dout, const float *q,
                   const float *k, const float *v, const float *out, const float *lse,
                   Index qStride, Index kvStride, const AttentionShape &s) {
  k::attentionBwdRef({const_cast<float *>(out), const_cast<float *>(lse), q, k, v, dq, dk, dv, dout,
                      s.batch, s.seq, s.heads, s.kvHeads, s.headDim, qStride, kvStride, s.causal});
}

void rope(float *out, const float *x, Index batch, Index seq, Index heads, Index headDim,
          float theta, Index rotaryDim) {
  k::ropeRef({out, x, batch, seq, heads, headDim, theta, false, rotaryDim});
}

void ropeGrad(float *dx, const float *dout, Index batch, Index seq, Index heads, Index headDim,
              float theta, Index rotaryDim) {
  k::ropeRef({dx, dout, batch, seq, heads, headDim, theta, true, rotaryDim});
}

void gelu(float *out, const float *x, Index n) {
  k::geluFwdRef({out, x, nullptr, nullptr, nullptr, nullptr, n});
}
void geluGrad(float *dx, const float *dout, const float *x, Index n) {
  k::geluBwdRef({nullptr, x, nullptr, dx, nullptr, dout, n});
}
void silu(float *out, const float *x, Index n) {
  k::siluFwdRef({out, x, nullptr, nullptr, nullptr, nullptr, n});
}
void siluGrad(float *dx, const float *dout, const float *x, Index n) {
  k::siluBwdRef({nullptr, x, nullptr, dx, nullptr, dout, n});
}
void mul(float *out, const float *a, const float *b, Index n) {
  k::mulFwdRef({out, a, b, nullptr, nullptr, nullptr, n});
}
void mulGrad(float *da, float *db, const float *dout, const float *a, const float *b, Index n) {
  k::mulBwdRef({nullptr, a, b, da, db, dout, n});
}

void crossEntropyRowMax(float *rowMax, const float *logits, Index rows, Index vocab) {
  k::crossEntropyMaxRef({logits, nullptr, rowMax, nullptr, nullptr, nullptr, rows, vocab, 0, rows});
}

void crossEntropyRowSums(float *sumExp, float *targetLogit, const float *logits,
                         const int32_t *targets, const float *rowMax, Index rows, Index vocab,
                         Index vocabStart) {
  k::crossEntropySumRef({logits, targets, const_cast<float *>(rowMax), sumExp, targetLogit, nullptr,
                         rows, vocab, vocabStart, rows});
}

void crossEntropyFinish(float *loss, float *stats, const float *rowMax, const float *sumExp,
                        const float *targetLogit, Index rows) {
  for (Index n = 0; n < rows; ++n) {
    stats[2 * n] = rowMax[n];
    stats[2 * n + 1] = rowMax[n] + std::log(sumExp[n]);
  }
  *loss = float(k::crossEntropyLossRef(
      {nullptr, nullptr, const_cast<float *>(rowMax), const_cast<float *>(sumExp),
       const_cast<float *>(targetLogit), nullptr, rows, 0, 0, rows}));
}

void crossEntropyGrad(float *dlogits, const float *dloss, const float *logits,
                      const int32_t *targets, const float *stats, Index rows, Index vocab,
                      Index vocabStart) {
  std::vector<float> rowMax(rows), sumExp(rows);
  for (Index n = 0; n < rows; ++n) {
    rowMax[n] = stats[2 * n];
    sumExp[n] = std::exp(stats[2 * n + 1] - stats[2 * n]);
  }
  k::crossEntropyBwdRef({logits, targets, rowMax.data(), sumExp.data(), nullptr, dlogits, rows,
                         vocab, vocabStart, rows, *dloss});
}

void maxOverBlocks(float *out, const float *blocks, int count, Index n) {
  for (Index i = 0; i < n; ++i) {
    float m = blocks[i];
    for (int b = 1; b < count; ++b)
      m = std::max(m, blocks[Index(b) * n + i]);
    out[i] = m;
  }
}

void adamW(float *master, float *m, float *v, float *param, const float *grad, Index n,
           const AdamWStep &s) {
  k::adamWRef({master, m, v, param, grad, n, s.lr, s.beta1, s.beta2, s.eps, s.weightDecay,
               s.gradScale, s.step});
}

} // namespace mist::rt::ops
