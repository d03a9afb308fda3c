//===- CudaOps.cu - The IR's ops on GPU ranks, over the CUDA kernels ------===//
/// \file
/// Ops.h over the CUDA kernels of stdlib/kernels (`<op>/<Op>Cuda.h`), which
/// take the reference kernels' argument structs: each op fills its struct
/// as CpuOps.cpp does and launches on the device's current stream, so the
/// GPU trainer runs the same IR-level semantics as the CPU ranks. Where the
/// IR's layouts differ from the kernels' (the interleaved `[N, 2]` norm and
/// loss statistics), small glue kernels here convert through a scratch
/// buffer; the LM head is the linear layer's GEMMs with the table in the
/// weight's place (see lmHead). Nothing here waits for the device.
///
/// Errors: every status is checked; a failure ends the job (abortJob) with
/// the op's name and the CUDA or cuBLAS error string.
///
/// Per stream (not per thread: one thread drives several streams, see
/// Device.h), ops keep a cuBLASLt context, since a context's one workspace
/// must serve one GEMM at a time (LinearCuda.h), and the glue scratch,
/// which the next op on the same stream may reuse because stream order puts
/// it after this op's kernels.
//===----------------------------------------------------------------------===//
#include "runtime/ops/Ops.h"

#include "runtime/comm/MpiCommunicator.h"
#include "runtime/device/Device.h"
#include "runtime/ops/Fp32Staging.h"
#include "stdlib/kernels/activation/ActivationCuda.h"
#include "stdlib/kernels/adamw/AdamWCuda.h"
#include "stdlib/kernels/attention/AttentionCuda.h"
#include "stdlib/kernels/attention/AttentionCudnn.h"
#include "stdlib/kernels/crossentropy/CrossEntropyCuda.h"
#include "stdlib/kernels/embedding/EmbeddingCuda.h"
#include "stdlib/kernels/init/InitialValuesCuda.h"
#include "stdlib/kernels/layernorm/LayerNormCuda.h"
#include "stdlib/kernels/linear/LinearCuda.h"
#include "stdlib/kernels/rmsnorm/RMSNormCuda.h"
#include "stdlib/kernels/rope/RopeCuda.h"

#include <algorithm>
#include <cstdio>
#include <cuda_runtime.h>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace k = mist::kernels;

namespace mist::rt::ops {

namespace {

//===----------------------------------------------------------------------===//
// Errors, streams and per-stream state
//===----------------------------------------------------------------------===//

void check(cudaError_t rc, const char *op) {
  if (rc != cudaSuccess)
    abortJob(std::string("ops::") + op + " failed on the GPU: " + cudaGetErrorString(rc));
}

void check(cublasStatus_t rc, const char *op) {
  if (rc != CUBLAS_STATUS_SUCCESS)
    abortJob(std::string("ops::") + op +
             " failed on the GPU (cuBLASLt): " + cublasLtGetStatusString(rc));
}

/// The size of a buffer of n elements; a negative n is the caller's bug.
size_t elements(Index n, const char *op) {
  if (n < 0)
    abortJob(std::string("ops::") + op + ": negative size " + std::to_string(n));
  return size_t(n);
}

cudaStream_t currentStream() { return static_cast<cudaStream_t>(device::currentStream()); }

struct StreamState {
  /// fp32 data on tf32 tensor cores (fp32 accumulation, about 1e-3 relative
  /// error per GEMM): exact fp32 GEMMs would run at a tenth of the speed, and
  /// the reference the GPU trainer is measured against trains in bf16.
  k::LinearContext linear{k::LinearMath::Tf32};
  /// cuDNN's flash attention for bf16 tensors (AttentionCudnn.h).
  k::AttentionCudnnContext attention;
  float *scratch = nullptr;
  size_t scratchFloats = 0;
};

/// The state of stream `s`, created on its first op. Streams live as long
/// as the trainer, so the states are never dropped; nor destroyed at exit,
/// where a LinearContext destructor could run after the CUDA runtime's.
StreamState &stateOf(cudaStream_t s) {
  static std::mutex lock;
  static auto *states = new std::unordered_map<cudaStream_t, std::unique_ptr<StreamState>>();
  std::lock_guard<std::mutex> guard(lock);
  std::unique_ptr<StreamState> &state = (*states)[s];
  if (!state)
    state = std::make_unique<StreamState>();
  return *state;
}

/// At least `floats` floats of the stream's scratch. Grows geometrically and
/// is kept, so the steady state allocates nothing. The old buffer is
/// released while `s` is current, which orders its reuse after the kernels
/// still reading it (CudaDevice.cpp's allocator is stream-ordered).
float *scratch(StreamState &state, size_t floats) {
  if (floats > state.scratchFloats) {
    device::release(state.scratch);
    size_t grown = std::max(floats, 2 * state.scratchFloats);
    state.scratch = static_cast<float *>(device::allocate(grown * sizeof(float), "ops scratch"));
    state.scratchFloats = grown;
  }
  return state.scratch;
}

//===----------------------------------------------------------------------===//
// Glue kernels: the IR's [N, 2] statistics, and the max over blocks
//===----------------------------------------------------------------------===//

constexpr int glueThreads = 256;

unsigned glueBlocks(Index n) {
  return unsigned(std::min<Index>((n + glueThreads - 1) / glueThreads, Index(1) << 16));
}

#define MIST_GRID_STRIDE(i, n)                                                                     \
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);                            \
       i += Index(gridDim.x) * blockDim.x)

/// pairs[n] = (first[n], second[n]); with `logSumExp`, the second value is
/// first[n] + log(second[n]) (the loss's (max, log-sum-exp) from max, sumExp).
template <bool logSumExp>
__global__ void interleaveKernel(float *pairs, const float *first, const float *second,
                                 Index rows) {
  MIST_GRID_STRIDE(n, rows) {
    pairs[2 * n] = first[n];
    pairs[2 * n + 1] = logSumExp ? first[n] + logf(second[n]) : second[n];
  }
}

/// The inverse: first[n] = pairs[n].0; second[n] = pairs[n].1, or with
/// `logSumExp` exp(pairs[n].1 - pairs[n].0) (sumExp back from max, lse).
template <bool logSumExp>
__global__ void deinterleaveKernel(float *first, float *second, const float *pairs, Index rows) {
  MIST_GRID_STRIDE(n, rows) {
    first[n] = pairs[2 * n];
    second[n] = logSumExp ? expf(pairs[2 * n + 1] - pairs[2 * n]) : pairs[2 * n + 1];
  }
}

/// `m < x ? x : m`, as CpuOps's std::max, so that NaNs propagate the same way.
__global__ void maxOverBlocksKernel(float *out, const float *blocks, int count, Index n) {
  MIST_GRID_STRIDE(i, n) {
    float m = blocks[i];
    for (int b = 1; b < count; ++b) {
      float x = blocks[Index(b) * n + i];
      m = m < x ? x : m;
    }
    out[i] = m;
  }
}

#undef MIST_GRID_STRIDE

template <bool logSumExp>
cudaError_t interleave(float *pairs, const float *first, const float *second, Index rows,
                       cudaStream_t s) {
  if (rows == 0)
    return cudaSuccess;
  interleaveKernel<logSumExp><<<glueBlocks(rows), glueThreads, 0, s>>>(pairs, first, second, rows);
  return cudaGetLastError();
}

template <bool logSumExp>
cudaError_t deinterleave(float *first, float *second, const float *pairs, Index rows,
                         cudaStream_t s) {
  if (rows == 0)
    return cudaSuccess;
  deinterleaveKernel<logSumExp>
      <<<glueBlocks(rows), glueThreads, 0, s>>>(first, second, pairs, rows);
  return cudaGetLastError();
}

/// The fp32 attention kernels exist for head dims 64 and 128 only: say so,
/// rather than the bare cudaErrorInvalidValue they would return.
void requireHeadDim(Index headDim, const char *op) {
  if (!k::attentionCudaSupportsHeadDim(headDim))
    abortJob(std::string("ops::") + op + ": the CUDA attention kernels support head dims 64 " +
             "and 128 only, not " + std::to_string(headDim) +
             " (other head dims need bf16 tensors and a build with cuDNN)");
}

//===----------------------------------------------------------------------===//
// Operands: bf16 kernels where the op's tensors are bf16, else fp32 ones
//===----------------------------------------------------------------------===//

using bf16 = __nv_bfloat16;

/// The tensors of a bf16 op, handed to the bf16 kernels as they are:
/// activations and parameters bf16, parameter gradients fp32 (accumulated).
struct Bf16Operands {
  bf16 *out(Tensor t, Index) { return static_cast<bf16 *>(t.data); }
  const bf16 *in(ConstTensor t, Index) { return static_cast<const bf16 *>(t.data); }
  float *grad(Tensor t, Index) { return t.f32(); }
};

/// The tensors of any other op, handed to the fp32 kernels: fp32 tensors as
/// they are, bf16 ones (a mix the bf16 kernels do not take, such as bf16
/// parameter gradients) through fp32 staging copies (Fp32Staging.h).
struct Fp32Operands {
  Fp32Staging staging;
  float *out(Tensor t, Index n) { return staging.out(t, n); }
  const float *in(ConstTensor t, Index n) { return staging.in(t, n); }
  float *grad(Tensor t, Index n) { return staging.inout(t, n); }
};

/// Whether the bf16 kernels take these operands: every present value
/// (activation or parameter) bf16, and every present gradient fp32.
bool bf16Kernels(std::initializer_list<ConstTensor> values,
                 std::initializer_list<ConstTensor> grads) {
  bool any = false;
  for (ConstTensor t : values) {
    if (t && t.dtype != DType::BF16)
      return false;
    any = any || t;
  }
  for (ConstTensor t : grads)
    if (t && t.dtype != DType::F32)
      return false;
  return any;
}

/// Runs `launch(operands)` with the bf16 or the fp32 operands (see above)
/// and checks its status. `launch` is generic: the kernels' entry points are
/// overloaded on their argument structs' element type, and the operands'
/// pointer types pick the overload.
template <typename Launch>
void run(const char *op, std::initializer_list<ConstTensor> values,
         std::initializer_list<ConstTensor> grads, Launch launch) {
  if (bf16Kernels(values, grads)) {
    Bf16Operands o;
    check(launch(o), op);
  } else {
    Fp32Operands o;
    check(launch(o), op);
  }
}

} // namespace

void setThreadsPerRank(int) {} // the GPU runs the ops; one host thread drives it

std::string describe() {
  return k::attentionCudnnBuilt() ? "CUDA kernels, cuBLASLt GEMMs, cuDNN attention (bf16)"
                                  : "CUDA kernels, cuBLASLt GEMMs";
}

//===----------------------------------------------------------------------===//
// Embeddings and elementwise
//===----------------------------------------------------------------------===//

void drawInitialValues(const k::InitialValuesArgs &a, int) {
  check(k::initialValuesCuda(a, currentStream()), "drawInitialValues");
}

void embedding(Tensor out, const int32_t *ids, ConstTensor table, Index tokens, Index channels,
               Index vocab, Index vocabStart) {
  run("embedding", {out, table}, {}, [&](auto &o) {
    return k::embeddingFwdCuda({o.out(out, tokens * channels), ids, o.in(table, vocab * channels),
                                nullptr, nullptr, tokens, channels, vocab, vocabStart},
                               currentStream());
  });
}

void embeddingGrad(Tensor dtable, ConstTensor dout, const int32_t *ids, Index tokens,
                   Index channels, Index vocab, Index vocabStart) {
  run("embeddingGrad", {dout}, {dtable}, [&](auto &o) {
    return k::embeddingBwdCuda({nullptr, ids, nullptr, o.grad(dtable, vocab * channels),
                                o.in(dout, tokens * channels), tokens, channels, vocab, vocabStart},
                               currentStream());
  });
}

void positionEmbedding(Tensor out, ConstTensor table, Index tokens, Index seq, Index channels,
                       Index firstToken) {
  run("positionEmbedding", {out, table}, {}, [&](auto &o) {
    return k::positionEmbeddingFwdCuda({o.out(out, tokens * channels), o.in(table, seq * channels),
                                        nullptr, nullptr, tokens, seq, channels, firstToken},
                                       currentStream());
  });
}

void positionEmbeddingGrad(Tensor dtable, ConstTensor dout, Index tokens, Index seq, Index channels,
                           Index firstToken) {
  run("positionEmbeddingGrad", {dout}, {dtable}, [&](auto &o) {
    return k::positionEmbeddingBwdCuda({nullptr, nullptr, o.grad(dtable, seq * channels),
                                        o.in(dout, tokens * channels), tokens, seq, channels,
                                        firstToken},
                                       currentStream());
  });
}

void add(Tensor out, ConstTensor a, ConstTensor b, Index n) {
  run("add", {out, a, b}, {}, [&](auto &o) {
    return k::addFwdCuda({o.out(out, n), o.in(a, n), o.in(b, n), nullptr, nullptr, nullptr, n},
                         currentStream());
  });
}

void copy(Tensor out, ConstTensor in, Index n) {
  if (elements(n, "copy") == 0 || out.data == in.data)
    return;
  device::convert(out, in, size_t(n));
}

void gelu(Tensor out, ConstTensor x, Index n) {
  run("gelu", {out, x}, {}, [&](auto &o) {
    return k::geluFwdCuda({o.out(out, n), o.in(x, n), nullptr, nullptr, nullptr, nullptr, n},
                          currentStream());
  });
}

void geluGrad(Tensor dx, ConstTensor dout, ConstTensor x, Index n) {
  run("geluGrad", {dx, dout, x}, {}, [&](auto &o) {
    return k::geluBwdCuda({nullptr, o.in(x, n), nullptr, o.out(dx, n), nullptr, o.in(dout, n), n},
                          currentStream());
  });
}

void geluExact(Tensor out, ConstTensor x, Index n) {
  run("geluExact", {out, x}, {}, [&](auto &o) {
    return k::geluExactFwdCuda({o.out(out, n), o.in(x, n), nullptr, nullptr, nullptr, nullptr, n},
                               currentStream());
  });
}

void geluExactGrad(Tensor dx, ConstTensor dout, ConstTensor x, Index n) {
  run("geluExactGrad", {dx, dout, x}, {}, [&](auto &o) {
    return k::geluExactBwdCuda(
        {nullptr, o.in(x, n), nullptr, o.out(dx, n), nullptr, o.in(dout, n), n}, currentStream());
  });
}

void silu(Tensor out, ConstTensor x, Index n) {
  run("silu", {out, x}, {}, [&](auto &o) {
    return k::siluFwdCuda({o.out(out, n), o.in(x, n), nullptr, nullptr, nullptr, nullptr, n},
                          currentStream());
  });
}

void siluGrad(Tensor dx, ConstTensor dout, ConstTensor x, Index n) {
  run("siluGrad", {dx, dout, x}, {}, [&](auto &o) {
    return k::siluBwdCuda({nullptr, o.in(x, n), nullptr, o.out(dx, n), nullptr, o.in(dout, n), n},
                          currentStream());
  });
}

void mul(Tensor out, ConstTensor a, ConstTensor b, Index n) {
  run("mul", {out, a, b}, {}, [&](auto &o) {
    return k::mulFwdCuda({o.out(out, n), o.in(a, n), o.in(b, n), nullptr, nullptr, nullptr, n},
                         currentStream());
  });
}

void mulGrad(Tensor da, Tensor db, ConstTensor dout, ConstTensor a, ConstTensor b, Index n) {
  run("mulGrad", {da, db, dout, a, b}, {}, [&](auto &o) {
    return k::mulBwdCuda(
        {nullptr, o.in(a, n), o.in(b, n), o.out(da, n), o.out(db, n), o.in(dout, n), n},
        currentStream());
  });
}

//===----------------------------------------------------------------------===//
// Norms
//===----------------------------------------------------------------------===//

void layerNorm(Tensor out, Tensor stats, ConstTensor x, ConstTensor weight, ConstTensor bias,
               Index rows, Index channels, float eps) {
  cudaStream_t s = currentStream();
  float *mean = scratch(stateOf(s), 2 * elements(rows, "layerNorm")), *rstd = mean + rows;
  run("layerNorm", {out, x, weight, bias}, {}, [&](auto &o) {
    return k::layerNormFwdCuda({o.out(out, rows * channels), mean, rstd, o.in(x, rows * channels),
                                o.in(weight, channels), o.in(bias, channels), nullptr, nullptr,
                                nullptr, nullptr, rows, channels, eps},
                               s);
  });
  check(interleave<false>(stats.f32(), mean, rstd, rows, s), "layerNorm (stats)");
}

void layerNormGrad(Tensor dx, Tensor dweight, Tensor dbias, ConstTensor dout, ConstTensor x,
                   ConstTensor weight, ConstTensor stats, Index rows, Index channels) {
  cudaStream_t s = currentStream();
  float *mean = scratch(stateOf(s), 2 * elements(rows, "layerNormGrad")), *rstd = mean + rows;
  check(deinterleave<false>(mean, rstd, stats.f32(), rows, s), "layerNormGrad (stats)");
  run("layerNormGrad", {dx, dout, x, weight}, {dweight, dbias}, [&](auto &o) {
    return k::layerNormBwdCuda({nullptr, mean, rstd, o.in(x, rows * channels),
                                o.in(weight, channels), nullptr, o.out(dx, rows * channels),
                                o.grad(dweight, channels), o.grad(dbias, channels),
                                o.in(dout, rows * channels), rows, channels, 0.f},
                               s);
  });
}

void rmsNorm(Tensor out, Tensor stats, ConstTensor x, ConstTensor weight, Index rows,
             Index channels, float eps) {
  // The IR's [N, 1] statistics are the kernel's rstd as they are.
  run("rmsNorm", {out, x, weight}, {}, [&](auto &o) {
    return k::rmsNormFwdCuda({o.out(out, rows * channels), stats.f32(), o.in(x, rows * channels),
                              o.in(weight, channels), nullptr, nullptr, nullptr, rows, channels,
                              eps},
                             currentStream());
  });
}

void rmsNormGrad(Tensor dx, Tensor dweight, ConstTensor dout, ConstTensor x, ConstTensor weight,
                 ConstTensor stats, Index rows, Index channels) {
  run("rmsNormGrad", {dx, dout, x, weight}, {dweight}, [&](auto &o) {
    return k::rmsNormBwdCuda({nullptr, const_cast<float *>(stats.f32()), o.in(x, rows * channels),
                              o.in(weight, channels), o.out(dx, rows * channels),
                              o.grad(dweight, channels), o.in(dout, rows * channels), rows,
                              channels, 0.f},
                             currentStream());
  });
}

void addLayerNorm(Tensor sum, Tensor out, Tensor stats, ConstTensor x, ConstTensor residual,
                  ConstTensor weight, ConstTensor bias, Index rows, Index channels, float eps) {
  cudaStream_t s = currentStream();
  float *mean = scratch(stateOf(s), 2 * elements(rows, "addLayerNorm")), *rstd = mean + rows;
  const Index n = rows * channels;
  run("addLayerNorm", {sum, out, x, residual, weight, bias}, {}, [&](auto &o) {
    return k::addLayerNormFwdCuda({o.out(out, n), mean, rstd, nullptr, o.in(weight, channels),
                                   o.in(bias, channels), nullptr, nullptr, nullptr, nullptr, rows,
                                   channels, eps},
                                  o.out(sum, n), o.in(x, n), o.in(residual, n), s);
  });
  check(interleave<false>(stats.f32(), mean, rstd, rows, s), "addLayerNorm (stats)");
}

void addRmsNorm(Tensor sum, Tensor out, Tensor stats, ConstTensor x, ConstTensor residual,
                ConstTensor weight, Index rows, Index channels, float eps) {
  const Index n = rows * channels;
  run("addRmsNorm", {sum, out, x, residual, weight}, {}, [&](auto &o) {
    return k::addRmsNormFwdCuda({o.out(out, n), stats.f32(), nullptr, o.in(weight, channels),
                                 nullptr, nullptr, nullptr, rows, channels, eps},
                                o.out(sum, n), o.in(x, n), o.in(residual, n), currentStream());
  });
}

//===----------------------------------------------------------------------===//
// Linear and the LM head
//===----------------------------------------------------------------------===//

void linear(Tensor out, ConstTensor x, ConstTensor weight, ConstTensor bias, Index rows, Index in,
            Index outF) {
  cudaStream_t s = currentStream();
  run("linear", {out, x, weight, bias}, {}, [&](auto &o) {
    return k::linearFwdCuda({o.out(out, rows * outF), o.in(x, rows * in), o.in(weight, in * outF),
                             o.in(bias, outF), nullptr, nullptr, nullptr, nullptr, rows, in, outF},
                            s, &stateOf(s).linear);
  });
}

void linearGrad(Tensor dx, Tensor dweight, Tensor dbias, ConstTensor dout, ConstTensor x,
                ConstTensor weight, Index rows, Index in, Index outF) {
  cudaStream_t s = currentStream();
  run("linearGrad", {dx, dout, x, weight}, {dweight, dbias}, [&](auto &o) {
    return k::linearBwdCuda({nullptr, o.in(x, rows * in), o.in(weight, in * outF), nullptr,
                             o.out(dx, rows * in), o.grad(dweight, in * outF), o.grad(dbias, outF),
                             o.in(dout, rows * outF), rows, in, outF},
                            s, &stateOf(s).linear);
  });
}

void linearGelu(Tensor out, Tensor preact, ConstTensor x, ConstTensor weight, ConstTensor bias,
                Index rows, Index in, Index outF) {
  if (!bf16Kernels({out, preact, x, weight, bias}, {})) { // fp32: the two ops
    linear(preact, x, weight, bias, rows, in, outF);
    gelu(out, preact, rows * outF);
    return;
  }
  cudaStream_t s = currentStream();
  Bf16Operands o;
  check(k::linearGeluFwdCuda({o.out(out, 0), o.in(x, 0), o.in(weight, 0), o.in(bias, 0), nullptr,
                              nullptr, nullptr, nullptr, rows, in, outF},
                             o.out(preact, 0), s, &stateOf(s).linear),
        "linearGelu");
}

void linearGradGelu(Tensor dpreact, Tensor dx, Tensor dweight, Tensor dbias, ConstTensor dout,
                    ConstTensor x, ConstTensor weight, ConstTensor preact, Index rows, Index in,
                    Index outF) {
  if (!bf16Kernels({dpreact, dx, dout, x, weight, preact}, {dweight, dbias})) {
    linearGrad(dx, dweight, dbias, dout, x, weight, rows, in, outF);
    geluGrad(dpreact, dx, preact, rows * in);
    return;
  }
  cudaStream_t s = currentStream();
  Bf16Operands o;
  check(k::linearBwdDgeluCuda({nullptr, o.in(x, 0), o.in(weight, 0), nullptr, o.out(dpreact, 0),
                               o.grad(dweight, 0), o.grad(dbias, 0), o.in(dout, 0), rows, in, outF},
                              o.in(preact, 0), o.out(dx, 0), s, &stateOf(s).linear),
        "linearGradGelu");
}

// The LM head's three GEMMs are the linear layer's, with the table [V, C]
// in the role of a weight [in = V, out = C], so the transposed table needs
// neither a copy nor a GEMM entry point of its own:
//   logits = x tableᵀ        is linear's dinp    = dout Wᵀ    (dout = x)
//   dx     = dlogits table   is linear's forward   inp W      (inp = dlogits)
//   dtable += dlogitsᵀ x     is linear's dweight += inpᵀ dout (inp = dlogits, dout = x)

void lmHead(Tensor logits, ConstTensor x, ConstTensor table, Index rows, Index channels,
            Index vocab) {
  cudaStream_t s = currentStream();
  run("lmHead", {logits, x, table}, {}, [&](auto &o) {
    return k::linearBwdCuda({nullptr, nullptr, o.in(table, vocab * channels), nullptr,
                             o.out(logits, rows * vocab), nullptr, nullptr,
                             o.in(x, rows * channels), rows, vocab, channels},
                            s, &stateOf(s).linear);
  });
}

void lmHeadGrad(Tensor dx, Tensor dtable, ConstTensor dlogits, ConstTensor x, ConstTensor table,
                Index rows, Index channels, Index vocab) {
  cudaStream_t s = currentStream();
  k::LinearContext &linearContext = stateOf(s).linear;
  run("lmHeadGrad", {dx, dlogits, x, table}, {dtable}, [&](auto &o) {
    const auto *dlogitsIn = o.in(dlogits, rows * vocab); // staged once for both GEMMs
    cublasStatus_t rc =
        k::linearFwdCuda({o.out(dx, rows * channels), dlogitsIn, o.in(table, vocab * channels),
                          nullptr, nullptr, nullptr, nullptr, nullptr, rows, vocab, channels},
                         s, &linearContext);
    if (rc != CUBLAS_STATUS_SUCCESS)
      return rc;
    return k::linearBwdCuda({nullptr, dlogitsIn, nullptr, nullptr, nullptr,
                             o.grad(dtable, vocab * channels), nullptr, o.in(x, rows * channels),
                             rows, vocab, channels},
                            s, &linearContext);
  });
}

//===----------------------------------------------------------------------===//
// Attention and rope
//===----------------------------------------------------------------------===//

/// bf16 attention runs on cuDNN where the build has it and cuDNN takes the
/// shape; otherwise (and for fp32 tensors) on the fp32 kernels, through
/// staging. The two agree on `lse` (the natural log-sum-exp of the scaled
/// scores), so a forward on one and a backward on the other is fine.
namespace {

/// Prints `text` as a note the first time `said` is false: why cuDNN did
/// not run an op the way its plan was priced (once per process and case).
void noteOnce(bool &said, const std::string &text) {
  if (!said)
    std::fprintf(stderr, "mistrt: note: %s\n", text.c_str());
  said = true;
}

void noteFallback(const char *op, const std::string &why, bool &said) {
  noteOnce(said, std::string(op) +
                     " runs on the fp32 attention kernels (bf16 staged), not cuDNN: " + why);
}

void checkCudnn(const k::AttentionCudnnStatus &rc, const char *op) {
  if (rc.failed())
    abortJob(std::string("ops::") + op + " failed on the GPU (cuDNN): " + rc.message());
}

} // namespace

void attention(Tensor out, Tensor lse, ConstTensor q, ConstTensor k, ConstTensor v, Index qStride,
               Index kvStride, const AttentionShape &s) {
  cudaStream_t stream = currentStream();
  if (bf16Kernels({out, q, k, v}, {})) {
    Bf16Operands o;
    k::AttentionCudnnStatus rc = k::attentionFwdCudnn(
        {o.out(out, 0), lse.f32(), o.in(q, 0), o.in(k, 0), o.in(v, 0), nullptr, nullptr, nullptr,
         nullptr, s.batch, s.seq, s.heads, s.kvHeads, s.headDim, qStride, kvStride, s.causal},
        stream, &stateOf(stream).attention);
    checkCudnn(rc, "attention");
    if (rc.ok())
      return;
    static bool said = false;
    noteFallback("attention", rc.message(), said);
  }
  requireHeadDim(s.headDim, "attention");
  Fp32Staging st;
  const Index tokens = s.batch * s.seq, width = s.heads * s.headDim;
  auto [q32, k32, v32] = st.inQkv(q, k, v, tokens, qStride, kvStride, width, s.kvHeads * s.headDim);
  check(k::attentionFwdCuda({st.out(out, tokens * width), lse.f32(), q32, k32, v32, nullptr,
                             nullptr, nullptr, nullptr, s.batch, s.seq, s.heads, s.kvHeads,
                             s.headDim, qStride, kvStride, s.causal},
                            stream),
        "attention");
}

void attentionGrad(Tensor dq, Tensor dk, Tensor dv, ConstTensor dout, ConstTensor q, ConstTensor k,
                   ConstTensor v, ConstTensor out, ConstTensor lse, Index qStride, Index kvStride,
                   const AttentionShape &s) {
  // dq, dk and dv have q's, k's and v's layouts (strides included), as the
  // IR's fused dqkv buffer has; the kernels write them (`=`).
  cudaStream_t stream = currentStream();
  if (bf16Kernels({dq, dk, dv, dout, q, k, v, out}, {})) {
    k::AttentionCudnnContext &context = stateOf(stream).attention;
    Bf16Operands o;
    const k::AttentionCudnnArgs args{const_cast<bf16 *>(o.in(out, 0)),
                                     const_cast<float *>(lse.f32()),
                                     o.in(q, 0),
                                     o.in(k, 0),
                                     o.in(v, 0),
                                     o.out(dq, 0),
                                     o.out(dk, 0),
                                     o.out(dv, 0),
                                     o.in(dout, 0),
                                     s.batch,
                                     s.seq,
                                     s.heads,
                                     s.kvHeads,
                                     s.headDim,
                                     qStride,
                                     kvStride,
                                     s.causal};
    // Without a deterministic cuDNN backward for the shape, cuDNN's fastest
    // one (dq's last bits may vary between runs, as the norms' atomic
    // parameter gradients already do) beats the fp32 kernels by far.
    std::string why;
    k::AttentionCudnnStatus rc = k::attentionBwdCudnnAnyAlgorithm(args, stream, context, why);
    static bool saidNondeterministic = false;
    if (!why.empty())
      noteOnce(saidNondeterministic, "attentionGrad: no deterministic cuDNN backward (" + why +
                                         "); using cuDNN's non-deterministic one");
    checkCudnn(rc, "attentionGrad");
    if (rc.ok())
      return;
    static bool said = false;
    noteFallback("attentionGrad", rc.message(), said);
  }
  requireHeadDim(s.headDim, "attentionGrad");
  Fp32Staging st;
  const Index tokens = s.batch * s.seq, width = s.heads * s.headDim,
              kvWidth = s.kvHeads * s.headDim;
  auto [q32, k32, v32] = st.inQkv(q, k, v, tokens, qStride, kvStride, width, kvWidth);
  auto [dq32, dk32, dv32] = st.outQkv(dq, dk, dv, tokens, qStride, kvStride, width, kvWidth);
  check(k::attentionBwdCuda({const_cast<float *>(st.in(out, tokens * width)),
                             const_cast<float *>(lse.f32()), q32, k32, v32, dq32, dk32, dv32,
                             st.in(dout, tokens * width), s.batch, s.seq, s.heads, s.kvHeads,
                             s.headDim, qStride, kvStride, s.causal},
                            stream),
        "attentionGrad");
}

void rope(Tensor out, ConstTensor x, Index batch, Index seq, Index heads, Index headDim,
          float theta, Index rotaryDim) {
  const Index n = batch * seq * heads * headDim;
  run("rope", {out, x}, {}, [&](auto &o) {
    return k::ropeCuda(
        {o.out(out, n), o.in(x, n), batch, seq, heads, headDim, theta, false, rotaryDim},
        currentStream());
  });
}

void ropeGrad(Tensor dx, ConstTensor dout, Index batch, Index seq, Index heads, Index headDim,
              float theta, Index rotaryDim) {
  const Index n = batch * seq * heads * headDim;
  run("ropeGrad", {dx, dout}, {}, [&](auto &o) {
    return k::ropeCuda(
        {o.out(dx, n), o.in(dout, n), batch, seq, heads, headDim, theta, true, rotaryDim},
        currentStream());
  });
}

//===----------------------------------------------------------------------===//
// Cross-entropy
//===----------------------------------------------------------------------===//

void crossEntropyRowMax(float *rowMax, ConstTensor logits, Index rows, Index vocab) {
  run("crossEntropyRowMax", {logits}, {}, [&](auto &o) {
    return k::crossEntropyMaxCuda({o.in(logits, rows * vocab), nullptr, rowMax, nullptr, nullptr,
                                   nullptr, rows, vocab, 0, rows},
                                  currentStream());
  });
}

void crossEntropyRowSums(float *sumExp, float *targetLogit, ConstTensor logits,
                         const int32_t *targets, const float *rowMax, Index rows, Index vocab,
                         Index vocabStart) {
  run("crossEntropyRowSums", {logits}, {}, [&](auto &o) {
    return k::crossEntropySumCuda({o.in(logits, rows * vocab), targets, const_cast<float *>(rowMax),
                                   sumExp, targetLogit, nullptr, rows, vocab, vocabStart, rows},
                                  currentStream());
  });
}

void crossEntropyFinish(Tensor loss, Tensor stats, const float *rowMax, const float *sumExp,
                        const float *targetLogit, Index rows) {
  cudaStream_t s = currentStream();
  elements(rows, "crossEntropyFinish");
  check(interleave<true>(stats.f32(), rowMax, sumExp, rows, s), "crossEntropyFinish (stats)");
  // The kernel's loss is this rank's rows' share of the mean over totalRows:
  // with totalRows = rows it is the mean over rows, as Ops.h defines it.
  check(k::crossEntropyLossCuda({nullptr, nullptr, const_cast<float *>(rowMax),
                                 const_cast<float *>(sumExp), const_cast<float *>(targetLogit),
                                 nullptr, rows, 0, 0, rows},
                                loss.f32(), s),
        "crossEntropyFinish");
}

void crossEntropyGrad(Tensor dlogits, ConstTensor dloss, ConstTensor logits, const int32_t *targets,
                      ConstTensor stats, Index rows, Index vocab, Index vocabStart) {
  cudaStream_t s = currentStream();
  float *rowMax = scratch(stateOf(s), 2 * elements(rows, "crossEntropyGrad")),
        *sumExp = rowMax + rows;
  check(deinterleave<true>(rowMax, sumExp, stats.f32(), rows, s), "crossEntropyGrad (stats)");
  // dloss stays on the device: the kernel reads *dloss, the host never waits.
  run("crossEntropyGrad", {dlogits, logits}, {}, [&](auto &o) {
    return k::crossEntropyBwdCuda({o.in(logits, rows * vocab), targets, rowMax, sumExp, nullptr,
                                   o.out(dlogits, rows * vocab), rows, vocab, vocabStart, rows},
                                  dloss.f32(), s);
  });
}

void maxOverBlocks(float *out, const float *blocks, int count, Index n) {
  if (count < 1)
    abortJob("ops::maxOverBlocks: " + std::to_string(count) + " blocks (at least one needed)");
  if (elements(n, "maxOverBlocks") == 0)
    return;
  maxOverBlocksKernel<<<glueBlocks(n), glueThreads, 0, currentStream()>>>(out, blocks, count, n);
  check(cudaGetLastError(), "maxOverBlocks");
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

void adamW(float *master, float *m, float *v, Tensor param, ConstTensor grad, Index n,
           const AdamWStep &s) {
  // The gradient is fp32 whatever the weights' type (the master's update
  // reads it): a bf16 one goes through staging.
  run("adamW", {param}, {grad}, [&](auto &o) {
    Fp32Staging gradStaging;
    return k::adamWCuda({master, m, v, o.out(param, n), gradStaging.in(grad, n), n, s.lr, s.beta1,
                         s.beta2, s.eps, s.weightDecay, s.gradScale, s.step},
                        currentStream());
  });
}

namespace {

/// One multi-tensor AdamW launch over `group` (weights of type T, fp32
/// gradients, one weight decay, at most adamWMaxTensors tensors).
template <typename T, typename Args>
void adamWMultiTensor(const std::vector<const AdamWTensor *> &group, const AdamWStep &s) {
  Args a{};
  a.count = int(group.size());
  for (size_t i = 0; i < group.size(); ++i) {
    const AdamWTensor &t = *group[i];
    a.master[i] = t.master;
    a.m[i] = t.m;
    a.v[i] = t.v;
    a.param[i] = static_cast<T *>(t.param.data);
    a.grad[i] = t.grad.f32();
    a.n[i] = t.n;
  }
  a.lr = s.lr;
  a.beta1 = s.beta1;
  a.beta2 = s.beta2;
  a.eps = s.eps;
  a.weightDecay = group.front()->weightDecay;
  a.gradScale = s.gradScale;
  a.step = s.step;
  check(k::adamWMultiTensorCuda(a, currentStream()), "adamWMany");
}

} // namespace

void adamWMany(const std::vector<AdamWTensor> &tensors, const AdamWStep &s) {
  // Consecutive tensors with fp32 gradients that share a weight type and a
  // weight decay go in one launch (up to adamWMaxTensors); the update is the
  // single-tensor kernel's element for element. Anything else runs alone.
  std::vector<const AdamWTensor *> group;
  auto flush = [&] {
    if (group.empty())
      return;
    if (group.front()->param.dtype == DType::BF16)
      adamWMultiTensor<bf16, k::AdamWMultiTensorBf16Args>(group, s);
    else
      adamWMultiTensor<float, k::AdamWMultiTensorArgs>(group, s);
    group.clear();
  };
  for (const AdamWTensor &t : tensors) {
    elements(t.n, "adamWMany");
    if (t.grad.dtype != DType::F32) {
      flush();
      AdamWStep own = s;
      own.weightDecay = t.weightDecay;
      adamW(t.master, t.m, t.v, t.param, t.grad, t.n, own);
      continue;
    }
    if (!group.empty() &&
        (group.front()->weightDecay != t.weightDecay ||
         group.front()->param.dtype != t.param.dtype || group.size() == size_t(k::adamWMaxTensors)))
      flush();
    group.push_back(&t);
  }
  flush();
}

} // namespace mist::rt::ops
