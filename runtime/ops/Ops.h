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
///
/// Precision: a floating-point operand is a Tensor (address and DType), so
/// one call serves fp32 and bf16 plans. bf16 tensors are storage only:
/// every op computes in fp32 (GEMM sums, norm statistics, softmax and the
/// loss) and rounds what it writes to the output's type once, as a GPU's
/// bf16 kernels with fp32 accumulation do; statistics, the loss and the
/// optimizer state stay fp32 (their IR types say f32). Kernels that read
/// fp32 only get their bf16 operands through runtime/ops/Fp32Staging.h.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/device/Tensor.h"
#include "stdlib/kernels/init/InitialValuesMath.h"
#include <cstdint>
#include <string>
#include <vector>

namespace mist::rt::ops {

using Index = int64_t;

/// Threads each rank's ops may use (the trainer's `--threads`): the CPU
/// ops split GEMMs, rows and heads over them; GPU ops ignore it.
void setThreadsPerRank(int threads);
/// How the ops run, for the trainer's start-up log (e.g. "CPU kernels,
/// GEMMs through OpenBLAS 0.3.21 ..., 1 thread per rank").
std::string describe();

/// a.out[i] = the initial value of local element i (a.out fp32 device
/// memory; stdlib/kernels/init/InitialValuesMath.h). On the CPU on up to
/// `hostThreads` threads, each free to run on any core whatever core the
/// rank is bound to (the values do not depend on the split); on a GPU by
/// a kernel, the host idle.
void drawInitialValues(const kernels::InitialValuesArgs &a, int hostThreads);

void embedding(Tensor out, const int32_t *ids, ConstTensor table, Index tokens, Index channels,
               Index vocab, Index vocabStart);
void embeddingGrad(Tensor dtable, ConstTensor dout, const int32_t *ids, Index tokens,
                   Index channels, Index vocab, Index vocabStart);
/// Rows [firstToken, firstToken + tokens) of the flattened [batch * seq]
/// token axis (row r at position r mod seq): every row, or under sequence
/// parallelism this tp rank's part.
void positionEmbedding(Tensor out, ConstTensor table, Index tokens, Index seq, Index channels,
                       Index firstToken);
void positionEmbeddingGrad(Tensor dtable, ConstTensor dout, Index tokens, Index seq, Index channels,
                           Index firstToken);

void add(Tensor out, ConstTensor a, ConstTensor b, Index n);
void copy(Tensor out, ConstTensor in, Index n);

void layerNorm(Tensor out, Tensor stats, ConstTensor x, ConstTensor weight, ConstTensor bias,
               Index rows, Index channels, float eps);
void layerNormGrad(Tensor dx, Tensor dweight, Tensor dbias, ConstTensor dout, ConstTensor x,
                   ConstTensor weight, ConstTensor stats, Index rows, Index channels);
void rmsNorm(Tensor out, Tensor stats, ConstTensor x, ConstTensor weight, Index rows,
             Index channels, float eps);
void rmsNormGrad(Tensor dx, Tensor dweight, ConstTensor dout, ConstTensor x, ConstTensor weight,
                 ConstTensor stats, Index rows, Index channels);

/// The residual add before a norm, as one op (the trainer emits it where a
/// norm reads an add's result): sum = x + residual, then layerNorm (or
/// rmsNorm) of sum. The same results as add then the norm, bit for bit; on
/// GPUs one kernel, which reads sum back from what it stored.
void addLayerNorm(Tensor sum, Tensor out, Tensor stats, ConstTensor x, ConstTensor residual,
                  ConstTensor weight, ConstTensor bias, Index rows, Index channels, float eps);
void addRmsNorm(Tensor sum, Tensor out, Tensor stats, ConstTensor x, ConstTensor residual,
                ConstTensor weight, Index rows, Index channels, float eps);

/// out[rows, outF] = x[rows, in] * weight[in, outF] (+ bias).
void linear(Tensor out, ConstTensor x, ConstTensor weight, ConstTensor bias, Index rows, Index in,
            Index outF);
void linearGrad(Tensor dx, Tensor dweight, Tensor dbias, ConstTensor dout, ConstTensor x,
                ConstTensor weight, Index rows, Index in, Index outF);

/// A linear layer followed by the tanh-approximation GELU, as one op (the
/// trainer emits it for a column-parallel linear whose output only the GELU
/// reads): preact = x weight (+ bias), out = gelu(preact). CPU ranks run
/// linear then gelu; GPUs one GEMM with cuBLASLt's GELU epilogue, whose GELU
/// reads the fp32 sum rather than its bf16 rounding (a rounding-level
/// difference in bf16 plans, none in fp32 ones, which run unfused).
void linearGelu(Tensor out, Tensor preact, ConstTensor x, ConstTensor weight, ConstTensor bias,
                Index rows, Index in, Index outF);
/// linearGrad of a layer whose input x = gelu(preact), then that GELU's
/// gradient: dpreact = gelu'(preact) · (dout weightᵀ); dweight, dbias as
/// linearGrad. `dx` is where dout weightᵀ goes when it is computed apart (CPU
/// ranks, or a GPU GEMM without the DGELU epilogue); a fused GEMM leaves it.
void linearGradGelu(Tensor dpreact, Tensor dx, Tensor dweight, Tensor dbias, ConstTensor dout,
                    ConstTensor x, ConstTensor weight, ConstTensor preact, Index rows, Index in,
                    Index outF);

/// logits[rows, vocab] = x[rows, channels] * table[vocab, channels]^T.
void lmHead(Tensor logits, ConstTensor x, ConstTensor table, Index rows, Index channels,
            Index vocab);
void lmHeadGrad(Tensor dx, Tensor dtable, ConstTensor dlogits, ConstTensor x, ConstTensor table,
                Index rows, Index channels, Index vocab);

struct AttentionShape {
  Index batch, seq, heads, kvHeads, headDim;
  bool causal = true;
};
/// q, k, v point into their buffers (for a fused qkv, into one buffer at
/// offsets 0, H*D and (H+KV)*D) with `qStride` / `kvStride` floats per token.
void attention(Tensor out, Tensor lse, ConstTensor q, ConstTensor k, ConstTensor v, Index qStride,
               Index kvStride, const AttentionShape &s);
void attentionGrad(Tensor dq, Tensor dk, Tensor dv, ConstTensor dout, ConstTensor q, ConstTensor k,
                   ConstTensor v, ConstTensor out, ConstTensor lse, Index qStride, Index kvStride,
                   const AttentionShape &s);

/// rotaryDim: the leading dims of each head that rotate (partial rotary).
void rope(Tensor out, ConstTensor x, Index batch, Index seq, Index heads, Index headDim,
          float theta, Index rotaryDim);
void ropeGrad(Tensor dx, ConstTensor dout, Index batch, Index seq, Index heads, Index headDim,
              float theta, Index rotaryDim);

/// GELU's tanh approximation (the language's `gelu(x)`, GPT-2's `gelu_new`).
void gelu(Tensor out, ConstTensor x, Index n);
void geluGrad(Tensor dx, ConstTensor dout, ConstTensor x, Index n);
/// The exact GELU, x Phi(x) (`gelu(x, approximate = false)`).
void geluExact(Tensor out, ConstTensor x, Index n);
void geluExactGrad(Tensor dx, ConstTensor dout, ConstTensor x, Index n);
void silu(Tensor out, ConstTensor x, Index n);
void siluGrad(Tensor dx, ConstTensor dout, ConstTensor x, Index n);
/// Layout ops along the last axis of row-major tensors of `rows` rows
/// (LayoutOps.cpp, the same on every device; the tensors share one dtype).
/// out[r, 0..size) = x[r, start..start + size) of a `width`-wide x.
void sliceLast(Tensor out, ConstTensor x, Index rows, Index width, Index start, Index size);
/// dx = 0 except dx[r, start..start + size) = dout[r, 0..size).
void sliceLastGrad(Tensor dx, ConstTensor dout, Index rows, Index width, Index start, Index size);
/// out[r] = a[r] (aWidth values), then b[r] (bWidth values).
void concatLast(Tensor out, ConstTensor a, ConstTensor b, Index rows, Index aWidth, Index bWidth);
/// da[r], db[r] = the first aWidth and the next bWidth values of dout[r].
void concatLastGrad(Tensor da, Tensor db, ConstTensor dout, Index rows, Index aWidth, Index bWidth);

void mul(Tensor out, ConstTensor a, ConstTensor b, Index n);
void mulGrad(Tensor da, Tensor db, ConstTensor dout, ConstTensor a, ConstTensor b, Index n);

// The loss in phases, so a vocabulary split over tp ranks can combine the
// phases' partial results between them (TpContext::crossEntropy):
/// rowMax[n] = the max of this rank's logits of row n.
void crossEntropyRowMax(float *rowMax, ConstTensor logits, Index rows, Index vocab);
/// sumExp[n] = sum of exp(logit - rowMax[n]) over this rank's columns;
/// targetLogit[n] = the target's logit if this rank holds its column
/// (vocabStart <= target < vocabStart + vocab), else 0.
void crossEntropyRowSums(float *sumExp, float *targetLogit, ConstTensor logits,
                         const int32_t *targets, const float *rowMax, Index rows, Index vocab,
                         Index vocabStart);
/// With the phases' values combined over the ranks: stats[n] = (rowMax[n],
/// rowMax[n] + log sumExp[n]) and *loss = the mean over rows of
/// log-sum-exp - targetLogit.
void crossEntropyFinish(Tensor loss, Tensor stats, const float *rowMax, const float *sumExp,
                        const float *targetLogit, Index rows);
/// dlogits = *dloss / totalRows * (softmax - onehot(target)) over this
/// rank's columns; `dloss` is a device scalar.
void crossEntropyGrad(Tensor dlogits, ConstTensor dloss, ConstTensor logits, const int32_t *targets,
                      ConstTensor stats, Index rows, Index vocab, Index vocabStart);
/// out[i] = the max over `count` blocks of n (blocks[b * n + i]).
void maxOverBlocks(float *out, const float *blocks, int count, Index n);

/// One AdamW step on n elements (fp32 master weights and moments): the
/// gradient is scaled by gradScale first, `param` gets the new weights.
struct AdamWStep {
  float lr, beta1, beta2, eps, weightDecay, gradScale;
  int step; ///< 1-based, for the bias corrections
};
void adamW(float *master, float *m, float *v, Tensor param, ConstTensor grad, Index n,
           const AdamWStep &s);

/// One tensor of adamWMany: its own weight decay (no_decay parameters: 0).
struct AdamWTensor {
  float *master, *m, *v;
  Tensor param;
  ConstTensor grad;
  Index n;
  float weightDecay;
};
/// adamW on each tensor, with `s` but each tensor's own weight decay
/// (`s.weightDecay` is not read): the same results as one adamW call per
/// tensor, in fewer launches on GPUs (multi-tensor kernels).
void adamWMany(const std::vector<AdamWTensor> &tensors, const AdamWStep &s);

} // namespace mist::rt::ops
