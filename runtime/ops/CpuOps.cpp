//===- CpuOps.cpp - The IR's ops on CPU ranks, over the fast CPU kernels --===//
/// \file
/// Each op calls its fast CPU kernel (stdlib/kernels/<op>/<Op>Cpu.h, tested
/// against the reference beside it); the embeddings and the loss's final
/// sum are the references themselves, which are already as fast as a copy.
//===----------------------------------------------------------------------===//
#include "runtime/ops/Ops.h"

#include "runtime/ops/Fp32Staging.h"
#include "stdlib/kernels/adamw/AdamWCpu.h"
#include "stdlib/kernels/cpu/Gemm.h"
#include "stdlib/kernels/cpu/Threads.h"

#include "stdlib/kernels/activation/ActivationCpu.h"
#include "stdlib/kernels/attention/AttentionCpu.h"
#include "stdlib/kernels/crossentropy/CrossEntropyCpu.h"
#include "stdlib/kernels/embedding/Embedding.h"
#include "stdlib/kernels/layernorm/LayerNormCpu.h"
#include "stdlib/kernels/linear/LinearCpu.h"
#include "stdlib/kernels/rmsnorm/RMSNormCpu.h"
#include "stdlib/kernels/rope/RopeCpu.h"
#include <algorithm>
#include <cmath>
#include <pthread.h>
#include <sched.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace k = mist::kernels;

namespace mist::rt::ops {

void setThreadsPerRank(int threads) { k::cpu::setCpuThreads(threads); }

std::string describe() {
  int threads = k::cpu::cpuThreads();
  std::string text = std::string("CPU kernels, GEMMs through ") + k::cpu::gemmBackend() + ", " +
                     std::to_string(threads) + (threads == 1 ? " thread" : " threads") +
                     " per rank";
  // mpirun binds each rank to one core by default: more threads than the
  // cores a rank may use only take turns on them.
  cpu_set_t allowed;
  if (threads > 1 && sched_getaffinity(0, sizeof(allowed), &allowed) == 0 &&
      CPU_COUNT(&allowed) < threads)
    text += " (but rank 0 may use only " + std::to_string(CPU_COUNT(&allowed)) +
            " core(s): give each rank its cores, e.g. mpirun --map-by slot:PE=" +
            std::to_string(threads) +
            " or --bind-to none, srun --cpus-per-task=" + std::to_string(threads) + ")";
  return text;
}

namespace {

/// Lets the calling thread run on any online core: the rank's own binding
/// is for its training loop. Where the job may not use them all (a cgroup
/// cpuset), the call fails and the thread keeps the rank's cores.
void mayUseEveryCore() {
  cpu_set_t all;
  CPU_ZERO(&all);
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  for (long c = 0; c < cores && c < CPU_SETSIZE; ++c)
    CPU_SET(int(c), &all);
  pthread_setaffinity_np(pthread_self(), sizeof all, &all);
}

} // namespace

void drawInitialValues(const k::InitialValuesArgs &a, int hostThreads) {
  auto fill = [&a](Index begin, Index end) {
    for (Index i = begin; i < end; ++i)
      a.out[i] = k::math::initialValueAt(a, i);
  };
  // Each element depends on its index alone, so threads change nothing but
  // the time.
  constexpr Index perThreadMin = Index(1) << 20;
  const Index threads = std::min<Index>(std::max(1, hostThreads), a.n / perThreadMin + 1);
  if (threads == 1)
    return fill(0, a.n);
  std::vector<std::thread> workers;
  const Index per = (a.n + threads - 1) / threads;
  for (Index t = 0; t < threads; ++t)
    workers.emplace_back(
        [&fill](Index begin, Index end) {
          mayUseEveryCore();
          fill(begin, end);
        },
        std::min(a.n, t * per), std::min(a.n, (t + 1) * per));
  for (std::thread &w : workers)
    w.join();
}

void embedding(Tensor out, const int32_t *ids, ConstTensor table, Index tokens, Index channels,
               Index vocab, Index vocabStart) {
  Fp32Staging st;
  k::embeddingFwdRef({st.out(out, tokens * channels), ids, st.in(table, vocab * channels), nullptr,
                      nullptr, tokens, channels, vocab, vocabStart});
}

void embeddingGrad(Tensor dtable, ConstTensor dout, const int32_t *ids, Index tokens,
                   Index channels, Index vocab, Index vocabStart) {
  Fp32Staging st;
  k::embeddingBwdRef({nullptr, ids, nullptr, st.inout(dtable, vocab * channels),
                      st.in(dout, tokens * channels), tokens, channels, vocab, vocabStart});
}

void positionEmbedding(Tensor out, ConstTensor table, Index tokens, Index seq, Index channels,
                       Index firstToken) {
  Fp32Staging st;
  k::positionEmbeddingFwdRef({st.out(out, tokens * channels), st.in(table, seq * channels), nullptr,
                              nullptr, tokens, seq, channels, firstToken});
}

void positionEmbeddingGrad(Tensor dtable, ConstTensor dout, Index tokens, Index seq, Index channels,
                           Index firstToken) {
  Fp32Staging st;
  k::positionEmbeddingBwdRef({nullptr, nullptr, st.inout(dtable, seq * channels),
                              st.in(dout, tokens * channels), tokens, seq, channels, firstToken});
}

void add(Tensor outT, ConstTensor aT, ConstTensor bT, Index n) {
  Fp32Staging st;
  k::addFwdCpu({st.out(outT, n), st.in(aT, n), st.in(bT, n), nullptr, nullptr, nullptr, n});
}

void copy(Tensor out, ConstTensor in, Index n) { device::convert(out, in, size_t(n)); }

void layerNorm(Tensor out, Tensor statsT, ConstTensor x, ConstTensor weight, ConstTensor bias,
               Index rows, Index channels, float eps) {
  Fp32Staging st;
  std::vector<float> mean(rows), rstd(rows);
  k::layerNormFwdCpu({st.out(out, rows * channels), mean.data(), rstd.data(),
                      st.in(x, rows * channels), st.in(weight, channels), st.in(bias, channels),
                      nullptr, nullptr, nullptr, nullptr, rows, channels, eps});
  float *stats = st.out(statsT, 2 * rows);
  for (Index n = 0; n < rows; ++n) {
    stats[2 * n] = mean[n];
    stats[2 * n + 1] = rstd[n];
  }
}

void layerNormGrad(Tensor dx, Tensor dweight, Tensor dbias, ConstTensor dout, ConstTensor x,
                   ConstTensor weight, ConstTensor statsT, Index rows, Index channels) {
  Fp32Staging st;
  const float *stats = st.in(statsT, 2 * rows);
  std::vector<float> mean(rows), rstd(rows);
  for (Index n = 0; n < rows; ++n) {
    mean[n] = stats[2 * n];
    rstd[n] = stats[2 * n + 1];
  }
  k::layerNormBwdCpu({nullptr, mean.data(), rstd.data(), st.in(x, rows * channels),
                      st.in(weight, channels), nullptr, st.out(dx, rows * channels),
                      st.inout(dweight, channels), st.inout(dbias, channels),
                      st.in(dout, rows * channels), rows, channels, 0.f});
}

void rmsNorm(Tensor out, Tensor stats, ConstTensor x, ConstTensor weight, Index rows,
             Index channels, float eps) {
  Fp32Staging st;
  k::rmsNormFwdCpu({st.out(out, rows * channels), st.out(stats, rows), st.in(x, rows * channels),
                    st.in(weight, channels), nullptr, nullptr, nullptr, rows, channels, eps});
}

void rmsNormGrad(Tensor dx, Tensor dweight, ConstTensor dout, ConstTensor x, ConstTensor weight,
                 ConstTensor stats, Index rows, Index channels) {
  Fp32Staging st;
  k::rmsNormBwdCpu({nullptr, const_cast<float *>(st.in(stats, rows)), st.in(x, rows * channels),
                    st.in(weight, channels), st.out(dx, rows * channels),
                    st.inout(dweight, channels), st.in(dout, rows * channels), rows, channels,
                    0.f});
}

void linear(Tensor out, ConstTensor x, ConstTensor weight, ConstTensor bias, Index rows, Index in,
            Index outF) {
  Fp32Staging st;
  k::linearFwdCpu({st.out(out, rows * outF), st.in(x, rows * in), st.in(weight, in * outF),
                   st.in(bias, outF), nullptr, nullptr, nullptr, nullptr, rows, in, outF});
}

void linearGrad(Tensor dx, Tensor dweight, Tensor dbias, ConstTensor dout, ConstTensor x,
                ConstTensor weight, Index rows, Index in, Index outF) {
  Fp32Staging st;
  k::linearBwdCpu({nullptr, st.in(x, rows * in), st.in(weight, in * outF), nullptr,
                   st.out(dx, rows * in), st.inout(dweight, in * outF), st.inout(dbias, outF),
                   st.in(dout, rows * outF), rows, in, outF});
}

void addLayerNorm(Tensor sum, Tensor out, Tensor stats, ConstTensor x, ConstTensor residual,
                  ConstTensor weight, ConstTensor bias, Index rows, Index channels, float eps) {
  add(sum, x, residual, rows * channels);
  layerNorm(out, stats, sum, weight, bias, rows, channels, eps);
}

void addRmsNorm(Tensor sum, Tensor out, Tensor stats, ConstTensor x, ConstTensor residual,
                ConstTensor weight, Index rows, Index channels, float eps) {
  add(sum, x, residual, rows * channels);
  rmsNorm(out, stats, sum, weight, rows, channels, eps);
}

void linearGelu(Tensor out, Tensor preact, ConstTensor x, ConstTensor weight, ConstTensor bias,
                Index rows, Index in, Index outF) {
  linear(preact, x, weight, bias, rows, in, outF);
  gelu(out, preact, rows * outF);
}

void linearGradGelu(Tensor dpreact, Tensor dx, Tensor dweight, Tensor dbias, ConstTensor dout,
                    ConstTensor x, ConstTensor weight, ConstTensor preact, Index rows, Index in,
                    Index outF) {
  linearGrad(dx, dweight, dbias, dout, x, weight, rows, in, outF);
  geluGrad(dpreact, dx, preact, rows * in);
}

void lmHead(Tensor logits, ConstTensor x, ConstTensor table, Index rows, Index channels,
            Index vocab) {
  Fp32Staging st;
  k::lmHeadFwdCpu(st.out(logits, rows * vocab), st.in(x, rows * channels),
                  st.in(table, vocab * channels), rows, channels, vocab);
}

void lmHeadGrad(Tensor dx, Tensor dtable, ConstTensor dlogits, ConstTensor x, ConstTensor table,
                Index rows, Index channels, Index vocab) {
  Fp32Staging st;
  k::lmHeadBwdCpu(st.out(dx, rows * channels), st.inout(dtable, vocab * channels),
                  st.in(dlogits, rows * vocab), st.in(x, rows * channels),
                  st.in(table, vocab * channels), rows, channels, vocab);
}

void attention(Tensor out, Tensor lse, ConstTensor q, ConstTensor k, ConstTensor v, Index qStride,
               Index kvStride, const AttentionShape &s) {
  Fp32Staging st;
  const Index tokens = s.batch * s.seq, width = s.heads * s.headDim;
  auto [q32, k32, v32] = st.inQkv(q, k, v, tokens, qStride, kvStride, width, s.kvHeads * s.headDim);
  k::attentionFwdCpu({st.out(out, tokens * width), st.out(lse, tokens * s.heads), q32, k32, v32,
                      nullptr, nullptr, nullptr, nullptr, s.batch, s.seq, s.heads, s.kvHeads,
                      s.headDim, qStride, kvStride, s.causal});
}

void attentionGrad(Tensor dq, Tensor dk, Tensor dv, ConstTensor dout, ConstTensor q, ConstTensor k,
                   ConstTensor v, ConstTensor out, ConstTensor lse, Index qStride, Index kvStride,
                   const AttentionShape &s) {
  Fp32Staging st;
  const Index tokens = s.batch * s.seq, width = s.heads * s.headDim,
              kvWidth = s.kvHeads * s.headDim;
  auto [q32, k32, v32] = st.inQkv(q, k, v, tokens, qStride, kvStride, width, kvWidth);
  auto [dq32, dk32, dv32] = st.outQkv(dq, dk, dv, tokens, qStride, kvStride, width, kvWidth);
  k::attentionBwdCpu({const_cast<float *>(st.in(out, tokens * width)),
                      const_cast<float *>(st.in(lse, tokens * s.heads)), q32, k32, v32, dq32, dk32,
                      dv32, st.in(dout, tokens * width), s.batch, s.seq, s.heads, s.kvHeads,
                      s.headDim, qStride, kvStride, s.causal});
}

void rope(Tensor out, ConstTensor x, Index batch, Index seq, Index heads, Index headDim,
          float theta, Index rotaryDim) {
  Fp32Staging st;
  const Index n = batch * seq * heads * headDim;
  k::ropeCpu({st.out(out, n), st.in(x, n), batch, seq, heads, headDim, theta, false, rotaryDim});
}

void ropeGrad(Tensor dx, ConstTensor dout, Index batch, Index seq, Index heads, Index headDim,
              float theta, Index rotaryDim) {
  Fp32Staging st;
  const Index n = batch * seq * heads * headDim;
  k::ropeCpu({st.out(dx, n), st.in(dout, n), batch, seq, heads, headDim, theta, true, rotaryDim});
}

void gelu(Tensor out, ConstTensor x, Index n) {
  Fp32Staging st;
  k::geluFwdCpu({st.out(out, n), st.in(x, n), nullptr, nullptr, nullptr, nullptr, n});
}
void geluGrad(Tensor dx, ConstTensor dout, ConstTensor x, Index n) {
  Fp32Staging st;
  k::geluBwdCpu({nullptr, st.in(x, n), nullptr, st.out(dx, n), nullptr, st.in(dout, n), n});
}
void geluExact(Tensor out, ConstTensor x, Index n) {
  Fp32Staging st;
  k::geluExactFwdCpu({st.out(out, n), st.in(x, n), nullptr, nullptr, nullptr, nullptr, n});
}
void geluExactGrad(Tensor dx, ConstTensor dout, ConstTensor x, Index n) {
  Fp32Staging st;
  k::geluExactBwdCpu({nullptr, st.in(x, n), nullptr, st.out(dx, n), nullptr, st.in(dout, n), n});
}
void silu(Tensor out, ConstTensor x, Index n) {
  Fp32Staging st;
  k::siluFwdCpu({st.out(out, n), st.in(x, n), nullptr, nullptr, nullptr, nullptr, n});
}
void siluGrad(Tensor dx, ConstTensor dout, ConstTensor x, Index n) {
  Fp32Staging st;
  k::siluBwdCpu({nullptr, st.in(x, n), nullptr, st.out(dx, n), nullptr, st.in(dout, n), n});
}
void mul(Tensor out, ConstTensor a, ConstTensor b, Index n) {
  Fp32Staging st;
  k::mulFwdCpu({st.out(out, n), st.in(a, n), st.in(b, n), nullptr, nullptr, nullptr, n});
}
void mulGrad(Tensor da, Tensor db, ConstTensor dout, ConstTensor a, ConstTensor b, Index n) {
  Fp32Staging st;
  k::mulBwdCpu(
      {nullptr, st.in(a, n), st.in(b, n), st.out(da, n), st.out(db, n), st.in(dout, n), n});
}

void crossEntropyRowMax(float *rowMax, ConstTensor logits, Index rows, Index vocab) {
  Fp32Staging st;
  k::crossEntropyMaxCpu({st.in(logits, rows * vocab), nullptr, rowMax, nullptr, nullptr, nullptr,
                         rows, vocab, 0, rows});
}

void crossEntropyRowSums(float *sumExp, float *targetLogit, ConstTensor logits,
                         const int32_t *targets, const float *rowMax, Index rows, Index vocab,
                         Index vocabStart) {
  Fp32Staging st;
  k::crossEntropySumCpu({st.in(logits, rows * vocab), targets, const_cast<float *>(rowMax), sumExp,
                         targetLogit, nullptr, rows, vocab, vocabStart, rows});
}

void crossEntropyFinish(Tensor lossT, Tensor statsT, const float *rowMax, const float *sumExp,
                        const float *targetLogit, Index rows) {
  float *stats = statsT.f32(), *loss = lossT.f32(); // the IR keeps both in fp32
  for (Index n = 0; n < rows; ++n) {
    stats[2 * n] = rowMax[n];
    stats[2 * n + 1] = rowMax[n] + std::log(sumExp[n]);
  }
  *loss = float(k::crossEntropyLossRef(
      {nullptr, nullptr, const_cast<float *>(rowMax), const_cast<float *>(sumExp),
       const_cast<float *>(targetLogit), nullptr, rows, 0, 0, rows}));
}

void crossEntropyGrad(Tensor dlogits, ConstTensor dloss, ConstTensor logits, const int32_t *targets,
                      ConstTensor statsT, Index rows, Index vocab, Index vocabStart) {
  Fp32Staging st;
  const float *stats = statsT.f32();
  std::vector<float> rowMax(rows), sumExp(rows);
  for (Index n = 0; n < rows; ++n) {
    rowMax[n] = stats[2 * n];
    sumExp[n] = std::exp(stats[2 * n + 1] - stats[2 * n]);
  }
  k::crossEntropyBwdCpu({st.in(logits, rows * vocab), targets, rowMax.data(), sumExp.data(),
                         nullptr, st.out(dlogits, rows * vocab), rows, vocab, vocabStart, rows,
                         *dloss.f32()});
}

void maxOverBlocks(float *out, const float *blocks, int count, Index n) {
  for (Index i = 0; i < n; ++i) {
    float m = blocks[i];
    for (int b = 1; b < count; ++b)
      m = std::max(m, blocks[Index(b) * n + i]);
    out[i] = m;
  }
}

void adamW(float *master, float *m, float *v, Tensor param, ConstTensor grad, Index n,
           const AdamWStep &s) {
  Fp32Staging st;
  k::adamWCpu({master, m, v, st.out(param, n), st.in(grad, n), n, s.lr, s.beta1, s.beta2, s.eps,
               s.weightDecay, s.gradScale, s.step});
}

void adamWMany(const std::vector<AdamWTensor> &tensors, const AdamWStep &s) {
  for (const AdamWTensor &t : tensors) {
    AdamWStep own = s;
    own.weightDecay = t.weightDecay;
    adamW(t.master, t.m, t.v, t.param, t.grad, t.n, own);
  }
}

} // namespace mist::rt::ops
