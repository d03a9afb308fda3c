//===- DeviceBuffer.cpp - Device and pinned memory for the profiler -------===//
#include "tools/profiler/DeviceBuffer.h"

namespace mist::profiler {

void checkCuda(cudaError_t rc, const char *what) {
  if (rc == cudaSuccess)
    return;
  cudaGetLastError(); // clear a non-sticky error so later calls can go on
  throw GpuError(std::string(what) + ": " + cudaGetErrorString(rc));
}

void checkCublas(cublasStatus_t rc, const char *what) {
  if (rc == CUBLAS_STATUS_SUCCESS)
    return;
  cudaGetLastError();
  throw GpuError(std::string(what) + ": " + cublasLtGetStatusString(rc));
}

PinnedBuffer::PinnedBuffer(size_t bytes) : n(bytes) {
  checkCuda(cudaMallocHost(&p, bytes ? bytes : 1), "cudaMallocHost");
}

PinnedBuffer::~PinnedBuffer() { cudaFreeHost(p); }

} // namespace mist::profiler
