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

#include <cuda_runtime_api.h>

namespace mist::kernels {

cudaError_t rmsNormFwdCuda(const RMSNormArgs &a, cudaStream_t stream);
/// Two launches: the column sums of dweight, added with fp32 atomics when
/// the rows are split over several blocks (the sum order then varies: not
/// bitwise deterministic), then dinp (one block per row), which may
/// therefore be the same buffer as dout.
cudaError_t rmsNormBwdCuda(const RMSNormArgs &a, cudaStream_t stream);

} // namespace mist::kernels
