//===- CudaDeviceKernels.h - The kernels behind Device.h's fills and sums -===//
/// \file
/// The element-wise primitives of Device.h (fill, fillIds, accumulate,
/// accumulateSquares, convert) need kernels, which only nvcc compiles; CudaDevice.cpp
/// is plain C++ and checks their launch status. So the launchers live in
/// CudaDeviceKernels.cu and are declared here, for CudaDevice.cpp only.
///
/// Each returns cudaSuccess without a launch when n == 0, else
/// cudaGetLastError() right after its launch on `stream`.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime_api.h>

#include "runtime/device/Tensor.h"

namespace mist::rt::device::cuda {

cudaError_t launchFill(float *dst, size_t n, float value, cudaStream_t stream);
cudaError_t launchFillIds(int32_t *dst, size_t n, int32_t value, cudaStream_t stream);
/// dst[i] += src[i] (summed in fp32, rounded to dst's type).
cudaError_t launchAccumulate(Tensor dst, ConstTensor src, size_t n, cudaStream_t stream);
/// dst[i] = src[i] in dst's type (bf16: rounded to nearest even).
cudaError_t launchConvert(Tensor dst, ConstTensor src, size_t n, cudaStream_t stream);
/// *sum += Σ x[i]^2, squared and summed in double; each block adds its
/// partial sum with one double atomicAdd, so the order of those additions
/// (hence the last bits of *sum) may vary from run to run.
cudaError_t launchAccumulateSquares(double *sum, ConstTensor x, size_t n, cudaStream_t stream);

} // namespace mist::rt::device::cuda
