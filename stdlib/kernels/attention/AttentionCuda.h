//===- AttentionCuda.h - Flash attention on the GPU, fp32 -----------------===//
/// \file
/// The CUDA version of attentionFwdRef / attentionBwdRef: the same
/// AttentionArgs, all pointers device memory, the same semantics: q at token
/// stride qStride, k and v at kvStride (a fused qkv buffer passes offsets and
/// its row stride), query head h reads kv head h / (H / KV), scores are
/// q·k / √D, `lse[b, h, t]` is the natural log-sum-exp of the scaled scores of
/// row t, out is [B, T, H, D] contiguous. The backward reads out and lse (as
/// saved by the forward), recomputes the scores, and writes (`=`, not `+=`)
/// dq at q's layout and dk, dv at k's and v's layout (a fused dqkv buffer works
/// the same way), dk and dv summed over the query heads sharing a kv head.
///
/// Flash-attention tiling: no [T, T] matrix is ever stored, the extra memory
/// is O(1) per row. fp32 throughout (inputs, online softmax, accumulation).
/// Head dims 64 and 128 only (template instantiations).
///
/// Errors: both functions return a cudaError_t and never abort:
/// cudaErrorInvalidValue for an unsupported head dim (anything but 64 or
/// 128), heads not a positive multiple of kvHeads, negative sizes, a batch or
/// head count over 65535 (grid limits) or a missing pointer; otherwise the
/// launch error (cudaGetLastError) of the kernels, which run asynchronously on
/// `stream`. lse may be null in the forward (inference: nothing saved).
///
/// Plain C++ can include this header.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/attention/Attention.h"

#include <cuda_runtime_api.h>

namespace mist::kernels {

/// Whether the CUDA kernels support `headDim` (64 and 128).
bool attentionCudaSupportsHeadDim(Index headDim);

/// Writes out and (unless null) lse.
cudaError_t attentionFwdCuda(const AttentionArgs &a, cudaStream_t stream);

/// Writes dq, dk, dv from dout, q, k, v, out and lse. Deterministic: two
/// kernels without atomics, one per kv tile summing dk and dv over the query
/// tiles and heads of its group, one per query tile summing dq over the kv
/// tiles, each in a fixed order (the scores are recomputed in both).
cudaError_t attentionBwdCuda(const AttentionArgs &a, cudaStream_t stream);

} // namespace mist::kernels
