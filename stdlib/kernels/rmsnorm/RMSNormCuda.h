//===- RMSNormCuda.h - CUDA RMSNorm over the last axis --------------------===//
/// \file
/// The CUDA kernels of RMSNorm.h, taking the same argument struct: every
/// pointer is device memory, launches are asynchronous on `stream`, and the
/// result is cudaErrorInvalidValue for a negative size, else
/// cudaGetLastError() after the launches (stdlib/kernels/README.md, "CUDA
/// kernels"). Forward writes out and rstd; backward writes dinp and adds
/// into dweight, as the reference does.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/rmsnorm/RMSNorm.h"

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace mist::kernels {

cudaError_t rmsNormFwdCuda(const RMSNormArgs &a, cudaStream_t stream);
/// Two launches: the column sums of dweight, added with fp32 atomics when
/// the rows are split over several blocks (the sum order then varies: not
/// bitwise deterministic), then dinp (one block per row), which may
/// therefore be the same buffer as dout.
cudaError_t rmsNormBwdCuda(const RMSNormArgs &a, cudaStream_t stream);

/// bf16 activations and weight, fp32 statistics, sums and weight gradient;
/// each bf16 output rounded once (stdlib/kernels/Storage.cuh).
using RMSNormBf16Args = RMSNormArgsOf<__nv_bfloat16>;
cudaError_t rmsNormFwdCuda(const RMSNormBf16Args &a, cudaStream_t stream);
cudaError_t rmsNormBwdCuda(const RMSNormBf16Args &a, cudaStream_t stream);

/// The residual add before an RMSNorm, fused: sum = x + residual (stored,
/// rounded to the type, exactly as addFwdCuda stores it), then the forward
/// of `a` on sum (a.inp is not read). Bit for bit the unfused pair.
cudaError_t addRmsNormFwdCuda(const RMSNormArgs &a, float *sum, const float *x,
                              const float *residual, cudaStream_t stream);
cudaError_t addRmsNormFwdCuda(const RMSNormBf16Args &a, __nv_bfloat16 *sum, const __nv_bfloat16 *x,
                              const __nv_bfloat16 *residual, cudaStream_t stream);

} // namespace mist::kernels
