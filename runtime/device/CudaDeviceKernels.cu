//===- CudaDeviceKernels.cu - Fills and sums of Device.h on the GPU -------===//
/// \file
/// Grid-stride loops of 256 threads, as the element-wise kernels of
/// stdlib/kernels are; the sum of squares (the gradient norm's) reduces each
/// block with the shared block reduction (stdlib/kernels/BlockReduce.cuh)
/// and adds one double per block into the result.
//===----------------------------------------------------------------------===//
#include "runtime/device/CudaDeviceKernels.h"

#include "stdlib/kernels/BlockReduce.cuh"

#include <algorithm>
#include <cuda_runtime.h>

namespace mist::rt::device::cuda {

namespace {

using mist::kernels::cuda::blockReduce;
using mist::kernels::cuda::Sum;

constexpr int threads = 256;
/// Element-wise grids stop growing here; the grid-stride loop covers the rest.
constexpr size_t maxBlocks = size_t(1) << 16;
/// The sum of squares uses fewer blocks (enough to fill an H100 several
/// times over), hence fewer atomics on the one result.
constexpr size_t maxSumBlocks = 1024;

unsigned blocksFor(size_t n, size_t cap) {
  return unsigned(std::min((n + threads - 1) / threads, cap));
}

template <typename T> __global__ void fillKernel(T *dst, size_t n, T value) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    dst[i] = value;
}

/// Element i of a tensor of either type, as fp32, and back.
__device__ inline float load(const void *p, DType t, size_t i) {
  return t == DType::F32 ? static_cast<const float *>(p)[i]
                         : fromBf16(static_cast<const uint16_t *>(p)[i]);
}
__device__ inline void store(void *p, DType t, size_t i, float x) {
  if (t == DType::F32)
    static_cast<float *>(p)[i] = x;
  else
    static_cast<uint16_t *>(p)[i] = toBf16(x);
}

__global__ void accumulateKernel(void *dst, DType dt, const void *src, DType st, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    store(dst, dt, i, load(dst, dt, i) + load(src, st, i));
}

__global__ void convertKernel(void *dst, DType dt, const void *src, DType st, size_t n) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    store(dst, dt, i, load(src, st, i));
}

__global__ void accumulateSquaresKernel(double *sum, const void *x, DType t, size_t n) {
  double s = 0;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const double v = load(x, t, i);
    s += v * v;
  }
  s = blockReduce(s, 0.0, Sum());
  if (threadIdx.x == 0)
    atomicAdd(sum, s);
}

template <typename T> cudaError_t fill(T *dst, size_t n, T value, cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  fillKernel<T><<<blocksFor(n, maxBlocks), threads, 0, stream>>>(dst, n, value);
  return cudaGetLastError();
}

} // namespace

cudaError_t launchFill(float *dst, size_t n, float value, cudaStream_t stream) {
  return fill(dst, n, value, stream);
}

cudaError_t launchFillIds(int32_t *dst, size_t n, int32_t value, cudaStream_t stream) {
  return fill(dst, n, value, stream);
}

cudaError_t launchAccumulate(Tensor dst, ConstTensor src, size_t n, cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  accumulateKernel<<<blocksFor(n, maxBlocks), threads, 0, stream>>>(dst.data, dst.dtype, src.data,
                                                                    src.dtype, n);
  return cudaGetLastError();
}

cudaError_t launchConvert(Tensor dst, ConstTensor src, size_t n, cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  convertKernel<<<blocksFor(n, maxBlocks), threads, 0, stream>>>(dst.data, dst.dtype, src.data,
                                                                 src.dtype, n);
  return cudaGetLastError();
}

cudaError_t launchAccumulateSquares(double *sum, ConstTensor x, size_t n, cudaStream_t stream) {
  if (n == 0)
    return cudaSuccess;
  accumulateSquaresKernel<<<blocksFor(n, maxSumBlocks), threads, 0, stream>>>(sum, x.data, x.dtype,
                                                                              n);
  return cudaGetLastError();
}

} // namespace mist::rt::device::cuda
