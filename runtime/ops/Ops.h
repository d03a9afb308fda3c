//===- Ops.h - The IR's ops, in the IR's layouts ---------------------------===//
/// \file
/// One function per IR op kind and direction, taking plain buffers in the
/// layouts the IR defines (docs/ir.md): norm statistics `[N, 2]` (mean,
/// rstd) or `[N, 1]` (rstd), attention reading a fused `[q | k | v]` per
/// token or separate q, k, v, the LM head's table `[V, C]`, the loss as the
/// mean over tokens with `.stats` `[N, 2]` (max, log-sum-exp). The emitted
/// trainer calls them, one call per IR op. Backward functions write
/// activation gradients and accumulate (`+=`) parameter gradients.
/// Everything here is one tp rank's view: the collectives are the caller's
/// (runtime/trainer/TpContext.h).
///
/// Two implementations, picked at link time with the device layer
/// (runtime/device/Device.h): CpuOps.cpp over the CPU reference kernels of
/// stdlib/kernels (the executable specification), and CudaOps.cu over their
/// CUDA kernels. Every pointer is device memory; every call is enqueued on
/// the device's current stream and returns without waiting.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace mist::rt::ops {

using Index = int64_t;

void embedding(float *out, const int32_t *ids, const float *table, Index tokens, Index channels,
               Index vocab, Index vocabStart);
void embeddingGrad(float *dtable, const float *dout, const int32_t *ids, Index tokens,
                   Index channels, Index vocab, Index vocabStart);
void positionEmbedding(float *out, const float *table, Index batch, Index seq, Index channels);
void positionEmbeddingGrad(float *dtable, const float *dout, Index batch, Index seq,
                           Index channels);

void add(float *out, const float *a, const float *b, Index n);
void copy(float *out, const float *in, Index n);

void layerNorm(float *out, float *stats, const float *x, const float *weight, const float *bias,
               Index rows, Index channels, float eps);
void layerNormGrad(float *dx, float *dweight, float *dbias, const float *dout, const float *x,
                   const float *weight, const float *stats, Index rows, Index channels);
void rmsNorm(float *out, float *stats, const float *x, const float *weight, Index rows,
             Index channels, float eps);
void rmsNormGrad(float *dx, float *dweight, const float *dout, const float *x, const float *weight,
                 const float *stats, Index rows, Index channels);

/// out[rows, outF] = x[rows, in] * weight[in, outF] (+ bias).
void linear(float *out, const float *x, const float *weight, const float *bias, Index rows,
            Index in, Index outF);
void linearGrad(float *dx, float *dweight, float *dbias, const float *dout, const float *x,
                const float *weight, Index rows, Index in, Index outF);

/// logits[rows, vocab] = x[rows, channels] * table[vocab, channels]^T.
void lmHead(float *logits, const float *x, const float *table, Index rows, Index channels,
            Index vocab);
void lmHeadGrad(float *dx, float *dtable, const float *dlogits, const float *x, const float *table,
                Index rows, Index channels, Index vocab);

struct AttentionShape {
  Index batch, seq, heads, kvHeads, headDim;
  bool causal = true;
};
/// q, k, v point into their buffers (for a fused qkv, into one buffer at
/// offsets 0, H*D and (H+KV)*D) with `qStride` / `kvStride` floats per token.
void attention(float *out, float *lse, const float *q, const float *k, const float *v,
               Index qStride, Index kvStride, const AttentionShape &s);
void attentionGrad(float *dq, float *dk, float *dv, const float *dout, const float *q,
                   const float *k, const float *v, const float *out, const float *lse,
                   Index qStride, Index kvStride, const AttentionShape &s);

/// rotaryDim: the leading dims of each head that rotate (partial rotary).
void rope(float *out, const float *x, Index batch, Index seq, Index heads, Index headDim,
          float theta, Index rotaryDim);
void ropeGrad(float *dx, const float *dout, Index batch, Index seq, Index heads, Index headDim,
              float theta, Index rotaryDim);

void gelu(float *out, const float *x, Index n);
void geluGrad(float *dx, const float *dout, const float *x, Index n);
void silu(float *out, const float *x, Index n);
void siluGrad(float *dx, const float *dout, const float *x, Index n);
void mul(float *out, const float *a, const float *b, Index n);
void mulGrad(float *da, float *db, const float *dout, const float *a, const float *b, Index n);

// The loss in phases, so a vocabulary split over tp ranks can combine the
// phases' partial results between them (TpContext::crossEntropy):
/// rowMax[n] = the max of this rank's logits of row n.
void crossEntropyRowMax(float *rowMax, const float *logits, Index rows, Index vocab);
/// sumExp[n] = sum of exp(logit - rowMax[n]) over this rank's columns;
/// targetLogit[n] = the target's logit if this rank holds its column
/// (vocabStart <= target < vocabStart + vocab), else 0.
void crossEntropyRowSums(float *sumExp, float *targetLogit, const float *logits,
                         const int32_t *targets, const float *rowMax, Index rows, Index vocab,
                         Index vocabStart);
/// With the phases' values combined over the ranks: stats[n] = (rowMax[n],
/// rowMax[n] + log sumExp[n]) and *loss = the mean over rows of
/// log-sum-exp - targetLogit.
void crossEntropyFinish(float *loss, float *stats, const float *rowMax, const float *sumExp,
                        const float *targetLogit, Index rows);
/// dlogits = *dloss / totalRows * (softmax - onehot(target)) over this
/// rank's columns; `dloss` is a device scalar.
void crossEntropyGrad(float *dlogits, const float *dloss, const float *logits,
                      const int32_t *targets, const float *stats, Index rows, Index vocab,
                      Index vocabStart);
/// out[i] = the max over `count` blocks of n (blocks[b * n + i]).
void maxOverBlocks(float *out, const float *blocks, int count, Index n);

/// One AdamW step on n elements (fp32 master weights and moments): the
/// gradient is scaled by gradScale first, `param` gets the new weights.
struct AdamWStep {
  float lr, beta1, beta2, eps, weightDecay, gradScale;
  int step; ///< 1-based, for the bias corrections
};
void adamW(float *master, float *m, float *v, float *param, const float *grad, Index n,
           const AdamWStep &s);

} // namespace mist::rt::ops
