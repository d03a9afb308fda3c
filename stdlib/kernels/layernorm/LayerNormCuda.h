//===- LayerNormCuda.h - CUDA LayerNorm over the last axis ----------------===//
/// \file
/// The CUDA kernels of LayerNorm.h, taking the same argument struct: every
/// pointer is device memory, launches are asynchronous on `stream`, and the
/// result is cudaErrorInvalidValue for a negative size, else
/// cudaGetLastError() after the launches (stdlib/kernels/README.md, "CUDA
/// kernels"). Forward writes out, mean and rstd; backward writes dinp and
/// adds into dweight (and dbias when not null), as the reference does.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/layernorm/LayerNorm.h"

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace mist::kernels {

cudaError_t layerNormFwdCuda(const LayerNormArgs &a, cudaStream_t stream);
/// Two launches: the column sums of dweight and dbias, added with fp32
/// atomics when the rows are split over several blocks (the sum order then
/// varies: not bitwise deterministic), then dinp (one block per row), which
/// may therefore be the same buffer as dout.
cudaError_t layerNormBwdCuda(const LayerNormArgs &a, cudaStream_t stream);

/// bf16 activations and parameters, fp32 statistics, sums and parameter
/// gradients; each bf16 output rounded once (stdlib/kernels/Storage.cuh).
using LayerNormBf16Args = LayerNormArgsOf<__nv_bfloat16>;
cudaError_t layerNormFwdCuda(const LayerNormBf16Args &a, cudaStream_t stream);
cudaError_t layerNormBwdCuda(const LayerNormBf16Args &a, cudaStream_t stream);

/// The residual add before a LayerNorm, fused: sum = x + residual (stored,
/// rounded to the type, exactly as addFwdCuda stores it), then the forward
/// of `a` on sum (a.inp is not read). Bit for bit the unfused pair.
cudaError_t addLayerNormFwdCuda(const LayerNormArgs &a, float *sum, const float *x,
                                const float *residual, cudaStream_t stream);
cudaError_t addLayerNormFwdCuda(const LayerNormBf16Args &a, __nv_bfloat16 *sum,
                                const __nv_bfloat16 *x, const __nv_bfloat16 *residual,
                                cudaStream_t stream);

} // namespace mist::kernels
