//===- RopeCuda.h - CUDA rotary position embedding ------------------------===//
/// \file
/// The CUDA kernel of Rope.h, taking the same argument struct: both
/// pointers are device memory and may be equal (in place), the launch is
/// asynchronous on `stream`, and the result is cudaErrorInvalidValue for a
/// negative size, else cudaGetLastError() after the launch
/// (stdlib/kernels/README.md, "CUDA kernels"). `inverse` selects backward.
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/rope/Rope.h"

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace mist::kernels {

cudaError_t ropeCuda(const RopeArgs &a, cudaStream_t stream);

/// bf16 in and out, the rotation in fp32, rounded once.
using RopeBf16Args = RopeArgsOf<__nv_bfloat16>;
cudaError_t ropeCuda(const RopeBf16Args &a, cudaStream_t stream);

} // namespace mist::kernels
