//===- CrossEntropyCuda.h - CUDA vocab-parallel cross-entropy -------------===//
/// \file
/// The CUDA kernels of CrossEntropy.h, taking the same argument struct and
/// split into the same phases, so that the caller all-reduces over tp
/// between them exactly as with the references (runtime/trainer/TpContext):
///
///   crossEntropyMaxCuda   rowMax = local row max      -> caller max-reduces
///   crossEntropySumCuda   sumExp, targetLogit          -> caller sum-reduces
///   crossEntropyLossCuda  *loss = this rank's rows' share of the mean loss
///   crossEntropyBwdCuda   dlogits = (softmax - onehot) * dloss / totalRows
///
/// Every pointer is device memory (loss included), launches are
/// asynchronous on `stream`, and the result is cudaErrorInvalidValue for a
/// negative size, else cudaGetLastError() after the launch
/// (stdlib/kernels/README.md, "CUDA kernels").
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/crossentropy/CrossEntropy.h"

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace mist::kernels {

cudaError_t crossEntropyMaxCuda(const CrossEntropyArgs &a, cudaStream_t stream);
/// Reads rowMax (the group's max); writes sumExp and targetLogit (the target's
/// logit where this slice holds it, else 0).
cudaError_t crossEntropySumCuda(const CrossEntropyArgs &a, cudaStream_t stream);
/// `*loss` (one float of device memory, assigned) = sum over this rank's rows
/// of (log(sumExp) + rowMax - targetLogit) / totalRows, summed in double by
/// one block in a fixed order (deterministic). 0 when rows == 0.
cudaError_t crossEntropyLossCuda(const CrossEntropyArgs &a, float *loss, cudaStream_t stream);
/// Reads the group's rowMax and sumExp; writes every dlogits element.
cudaError_t crossEntropyBwdCuda(const CrossEntropyArgs &a, cudaStream_t stream);
/// The same with the loss's gradient read on the device from `*dloss` (one
/// float of device memory; a.dloss is ignored), for callers whose dloss is
/// itself a device value: they need not synchronize the host to read it.
cudaError_t crossEntropyBwdCuda(const CrossEntropyArgs &a, const float *dloss, cudaStream_t stream);

/// bf16 logits and dlogits (the LM head's bf16 output is read as it is: no
/// fp32 copy of the [N, V] logits), fp32 statistics and sums, each dlogits
/// element rounded once. The loss reads the fp32 statistics only: it has the
/// fp32 entry point alone.
using CrossEntropyBf16Args = CrossEntropyArgsOf<__nv_bfloat16>;
cudaError_t crossEntropyMaxCuda(const CrossEntropyBf16Args &a, cudaStream_t stream);
cudaError_t crossEntropySumCuda(const CrossEntropyBf16Args &a, cudaStream_t stream);
cudaError_t crossEntropyBwdCuda(const CrossEntropyBf16Args &a, cudaStream_t stream);
cudaError_t crossEntropyBwdCuda(const CrossEntropyBf16Args &a, const float *dloss,
                                cudaStream_t stream);

} // namespace mist::kernels
