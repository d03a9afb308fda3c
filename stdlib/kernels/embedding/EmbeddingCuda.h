//===- EmbeddingCuda.h - CUDA token and position embeddings ---------------===//
/// \file
/// The CUDA kernels of Embedding.h, taking the same argument structs: every
/// pointer is device memory, launches are asynchronous on `stream`, and the
/// result is cudaErrorInvalidValue for a negative size, else
/// cudaGetLastError() after the launch (stdlib/kernels/README.md, "CUDA
/// kernels"). Forward writes out; backward adds into dtable.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/embedding/Embedding.h"

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace mist::kernels {

/// Ids outside [vocabStart, vocabStart + vocab) give zero rows.
cudaError_t embeddingFwdCuda(const EmbeddingArgs &a, cudaStream_t stream);
/// dtable[id - vocabStart] += dout for the ids of this slice, with fp32
/// atomicAdd: tokens sharing an id add in a varying order (not bitwise
/// deterministic).
cudaError_t embeddingBwdCuda(const EmbeddingArgs &a, cudaStream_t stream);
cudaError_t positionEmbeddingFwdCuda(const PositionEmbeddingArgs &a, cudaStream_t stream);
/// dtable[t] += the rows of dout at position t, in row order (deterministic, no atomics).
cudaError_t positionEmbeddingBwdCuda(const PositionEmbeddingArgs &a, cudaStream_t stream);

/// bf16 activations and tables, fp32 table gradients: the same kernels.
using EmbeddingBf16Args = EmbeddingArgsOf<__nv_bfloat16>;
using PositionEmbeddingBf16Args = PositionEmbeddingArgsOf<__nv_bfloat16>;
cudaError_t embeddingFwdCuda(const EmbeddingBf16Args &a, cudaStream_t stream);
cudaError_t embeddingBwdCuda(const EmbeddingBf16Args &a, cudaStream_t stream);
cudaError_t positionEmbeddingFwdCuda(const PositionEmbeddingBf16Args &a, cudaStream_t stream);
cudaError_t positionEmbeddingBwdCuda(const PositionEmbeddingBf16Args &a, cudaStream_t stream);

} // namespace mist::kernels
