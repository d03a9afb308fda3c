//===- InitialValues.cu - Initial parameter values drawn on the GPU -------===//
#include "stdlib/kernels/init/InitialValuesCuda.h"

#include <algorithm>

namespace mist::kernels {

namespace {

__global__ void initialValuesKernel(InitialValuesArgs a) {
  const Index stride = Index(gridDim.x) * blockDim.x;
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n; i += stride)
    a.out[i] = math::initialValueAt(a, i);
}

static_assert(sizeof(InitialValuesArgs) <= 4096, "a kernel argument, within the 4 KiB limit");

} // namespace

cudaError_t initialValuesCuda(const InitialValuesArgs &a, cudaStream_t stream) {
  if (a.n < 0 || a.tp < 1 || a.groupCount < 0 || a.groupCount > initialValuesMaxGroups ||
      (a.n > 0 && a.out == nullptr))
    return cudaErrorInvalidValue;
  if (a.n == 0)
    return cudaSuccess;
  constexpr int threads = 256;
  const Index blocks = std::min<Index>((a.n + threads - 1) / threads, Index(1) << 16);
  initialValuesKernel<<<unsigned(blocks), threads, 0, stream>>>(a);
  return cudaGetLastError();
}

} // namespace mist::kernels
