//===- ActivationCuda.h - CUDA elementwise GELU, SiLU, product and sum ----===//
/// \file
/// The CUDA kernels of Activation.h, taking the same argument struct: every
/// pointer is device memory, the launch is asynchronous on `stream`, and the
/// result is cudaErrorInvalidValue for a negative size, else
/// cudaGetLastError() after the launch (stdlib/kernels/README.md, "CUDA
/// kernels"). In-place use (out == a, da == dout) is allowed. The bf16
/// overloads compute in fp32 and round each output once
/// (stdlib/kernels/Storage.cuh).
//===----------------------------------------------------------------------===//
#pragma once

#include "stdlib/kernels/activation/Activation.h"

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

namespace mist::kernels {

cudaError_t geluFwdCuda(const ElementwiseArgs &x, cudaStream_t stream); ///< tanh approximation
cudaError_t geluBwdCuda(const ElementwiseArgs &x, cudaStream_t stream);
cudaError_t geluExactFwdCuda(const ElementwiseArgs &x, cudaStream_t stream); ///< x Phi(x)
cudaError_t geluExactBwdCuda(const ElementwiseArgs &x, cudaStream_t stream);
cudaError_t siluFwdCuda(const ElementwiseArgs &x, cudaStream_t stream);
cudaError_t siluBwdCuda(const ElementwiseArgs &x, cudaStream_t stream);
cudaError_t mulFwdCuda(const ElementwiseArgs &x, cudaStream_t stream);
cudaError_t mulBwdCuda(const ElementwiseArgs &x, cudaStream_t stream);
cudaError_t addFwdCuda(const ElementwiseArgs &x, cudaStream_t stream);

using ElementwiseBf16Args = ElementwiseArgsOf<__nv_bfloat16>;
cudaError_t geluFwdCuda(const ElementwiseBf16Args &x, cudaStream_t stream);
cudaError_t geluBwdCuda(const ElementwiseBf16Args &x, cudaStream_t stream);
cudaError_t geluExactFwdCuda(const ElementwiseBf16Args &x, cudaStream_t stream);
cudaError_t geluExactBwdCuda(const ElementwiseBf16Args &x, cudaStream_t stream);
cudaError_t siluFwdCuda(const ElementwiseBf16Args &x, cudaStream_t stream);
cudaError_t siluBwdCuda(const ElementwiseBf16Args &x, cudaStream_t stream);
cudaError_t mulFwdCuda(const ElementwiseBf16Args &x, cudaStream_t stream);
cudaError_t mulBwdCuda(const ElementwiseBf16Args &x, cudaStream_t stream);
cudaError_t addFwdCuda(const ElementwiseBf16Args &x, cudaStream_t stream);

} // namespace mist::kernels
