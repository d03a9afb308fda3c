//===- AttentionCudnn.h - Flash attention in bf16 through cuDNN -----------===//
/// \file
/// Causal attention forward and backward with bf16 tensors, run by cuDNN's
/// fused flash-attention kernels (the cuDNN frontend's `sdpa` and
/// `sdpa_backward` graph operations). The semantics are those of the fp32
/// kernels (AttentionCuda.h, AttentionRef.cpp): q is [B, T, H, D] at token
/// stride qStride, k and v are [B, T, KV, D] at token stride kvStride (a
/// fused qkv buffer passes three pointers into one buffer and its row
/// stride), query head h reads kv head h / (H / KV), scores are q·k / √D
/// with the top-left causal mask (key s ≤ query t), out is [B, T, H, D]
/// contiguous, and `lse[b, h, t]` (fp32, [B, H, T]) is the natural
/// log-sum-exp of the scaled, masked scores of row t. The backward reads
/// dout ([B, T, H, D]), q, k, v, out and lse, and writes (`=`) dq at q's
/// layout and dk, dv at k's and v's layout, dk and dv summed over the query
/// heads sharing a kv head. Inside cuDNN the products accumulate in fp32 and
/// the softmax is fp32; out, dq, dk and dv are rounded to bf16 once.
///
/// Every tensor is handed to cuDNN as a strided [b, h, s, d] view of the
/// caller's buffer: nothing is copied or transposed.
///
/// Status: each entry point returns an AttentionCudnnStatus and never aborts
/// or throws.
///   - Ok: the work is queued on `stream` (or there was nothing to do).
///   - Unsupported: this build has no cuDNN (attentionCudnnBuilt() is false),
///     or cuDNN has no kernel for the configuration (head dim, GQA in the
///     backward, sequence length, GPU or cuDNN version, a pointer or stride
///     that is not 16-byte aligned, no deterministic backward where one was
///     asked for, a workspace the device has no memory for, ...). Nothing was launched: the caller
///     runs the fp32 kernels instead. The verdict is cached per shape, so asking again is cheap.
///   - Failed: invalid arguments (negative sizes, heads not a multiple of
///     kvHeads, a token stride smaller than the heads it holds, a null pointer),
///     a context used on another device than its own, or an error of CUDA or
///     cuDNN while preparing or launching the work.
/// message() says why in words for the last two.
///
/// Plain C++ can include this header (it needs the CUDA include directories,
/// which linking mistKernelsCuda provides); it exposes no cuDNN type.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/Tensor.h"

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <memory>
#include <string>
#include <utility>

namespace mist::kernels {

struct AttentionCudnnArgs {
  __nv_bfloat16 *out;             ///< [B, T, H, D]
  float *lse;                     ///< [B, H, T]; may be null in the forward
  const __nv_bfloat16 *q, *k, *v; ///< token strides below
  __nv_bfloat16 *dq, *dk, *dv;    ///< same layouts as q, k, v; = in backward
  const __nv_bfloat16 *dout;      ///< [B, T, H, D]
  Index batch, seq, heads, kvHeads, headDim;
  Index qStride, kvStride; ///< elements between consecutive tokens of q / of k and v
  bool causal = true;
};

enum class AttentionCudnnCode {
  Ok,          ///< queued (or nothing to do)
  Unsupported, ///< no cuDNN, or cuDNN cannot run this configuration: use the fp32 kernels
  Failed,      ///< invalid arguments, or a real CUDA / cuDNN error
};

class AttentionCudnnStatus {
public:
  AttentionCudnnStatus() = default;
  AttentionCudnnStatus(AttentionCudnnCode code, std::string message)
      : code_(code), message_(std::move(message)) {}

  AttentionCudnnCode code() const { return code_; }
  bool ok() const { return code_ == AttentionCudnnCode::Ok; }
  bool unsupported() const { return code_ == AttentionCudnnCode::Unsupported; }
  bool failed() const { return code_ == AttentionCudnnCode::Failed; }
  /// Why it is not Ok (empty when it is).
  const std::string &message() const { return message_; }

private:
  AttentionCudnnCode code_ = AttentionCudnnCode::Ok;
  std::string message_;
};

/// Owns the cuDNN handle, a workspace and the cuDNN graphs built so far,
/// one per configuration (forward or backward, sizes, strides, causal, lse
/// or not, determinism), including the verdict for configurations cuDNN
/// refused.
///
/// Lifetime: constructing one is free; the handle is created on first use,
/// on the device current at that moment, and belongs to that device; the
/// workspace is allocated with cudaMalloc and grows to what the largest
/// graph asks for (growing waits for `stream` first, so it must not happen
/// during stream capture: run each shape once before capturing). The
/// destructor frees them (it must run while the CUDA runtime is alive). A
/// context is not thread-safe and its one workspace must not be used by two
/// launches at once: use one context per stream. Passing no context to the
/// entry points uses AttentionCudnnContext::processDefault(), one
/// process-wide context for a process that drives one GPU from one stream;
/// it is never destroyed (it leaks at exit on purpose, so no destructor
/// races the CUDA runtime's).
class AttentionCudnnContext {
public:
  AttentionCudnnContext();
  ~AttentionCudnnContext();
  AttentionCudnnContext(const AttentionCudnnContext &) = delete;
  AttentionCudnnContext &operator=(const AttentionCudnnContext &) = delete;

  /// The context used when an entry point is given none (see above).
  static AttentionCudnnContext &processDefault();

  /// Whether the backward must be cuDNN's deterministic algorithm (the
  /// default: bit-identical gradients run to run, as the fp32 kernels give).
  /// Where cuDNN has no deterministic backward for a configuration, the
  /// backward returns Unsupported; setting this to false lets cuDNN pick a
  /// faster algorithm whose dq may differ in the last bits between runs.
  bool deterministicBackward() const { return deterministicBackward_; }
  void setDeterministicBackward(bool value) { deterministicBackward_ = value; }

  struct State; ///< handle, workspace and graph cache (AttentionCudnn.cpp)
  /// The state, created on first call; null (with `status` saying why) when
  /// the handle cannot be created or the context belongs to another device.
  State *state(AttentionCudnnStatus &status);

private:
  bool deterministicBackward_ = true;
  std::unique_ptr<State> state_;
};

/// Whether this build has cuDNN (false: every call returns Unsupported).
bool attentionCudnnBuilt();

/// Writes out and (unless null) lse.
AttentionCudnnStatus attentionFwdCudnn(const AttentionCudnnArgs &a, cudaStream_t stream,
                                       AttentionCudnnContext *ctx = nullptr);

/// Writes dq, dk, dv from dout, q, k, v, out and lse.
AttentionCudnnStatus attentionBwdCudnn(const AttentionCudnnArgs &a, cudaStream_t stream,
                                       AttentionCudnnContext *ctx = nullptr);

/// attentionBwdCudnn, and where cuDNN has no deterministic backward for the
/// shape or it does not fit in memory (Unsupported while ctx asks for one),
/// once more with its non-deterministic algorithm; if that runs, ctx keeps
/// asking for it and `why` receives the first refusal's message (else `why`
/// is cleared and ctx still asks for determinism).
/// What the trainer, the profiler and the kernel benchmark all run.
AttentionCudnnStatus attentionBwdCudnnAnyAlgorithm(const AttentionCudnnArgs &a, cudaStream_t stream,
                                                   AttentionCudnnContext &ctx, std::string &why);

} // namespace mist::kernels
