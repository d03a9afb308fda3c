//===- DeviceBuffer.h - Device and pinned memory for the profiler ---------===//
/// \file
/// RAII device and pinned host buffers, random fills on the device, and the
/// error convention of the GPU half of the profiler: a failed CUDA or
/// cuBLAS call throws GpuError, which the caller turns into "cannot time
/// this" (an op) or a fatal message (a figure the cluster file needs).
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>
#include <stdexcept>
#include <string>

namespace mist::profiler {

struct GpuError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Throws GpuError("what: CUDA's message") unless `rc` is cudaSuccess
/// (clearing the sticky-free error state first, so later calls go on).
void checkCuda(cudaError_t rc, const char *what);
/// The same for cuBLAS(Lt) statuses.
void checkCublas(cublasStatus_t rc, const char *what);

/// `count` elements of T in device memory, zeroed (synchronously), freed on
/// destruction.
template <typename T> class DeviceBuffer {
public:
  explicit DeviceBuffer(size_t count) : n(count) {
    checkCuda(cudaMalloc(reinterpret_cast<void **>(&p), bytes() ? bytes() : sizeof(T)),
              "cudaMalloc");
    // cudaMemset runs on the legacy default stream, which the profiler's
    // non-blocking streams do not wait for: finish it before anyone fills.
    cudaError_t rc = cudaMemset(p, 0, bytes() ? bytes() : sizeof(T));
    if (rc == cudaSuccess)
      rc = cudaDeviceSynchronize();
    if (rc != cudaSuccess) {
      cudaFree(p);
      checkCuda(rc, "cudaMemset");
    }
  }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  T *get() const { return p; }
  size_t size() const { return n; }
  size_t bytes() const { return n * sizeof(T); }

private:
  T *p = nullptr;
  size_t n;
};

/// Page-locked host memory (cudaMallocHost), freed on destruction.
class PinnedBuffer {
public:
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer &) = delete;
  PinnedBuffer &operator=(const PinnedBuffer &) = delete;
  void *get() const { return p; }
  size_t bytes() const { return n; }

private:
  void *p = nullptr;
  size_t n;
};

/// Uniform values in [-scale, scale) from a counter-based hash of `seed`
/// and the index (RandomFill.cu); asynchronous on `stream`.
void fillRandom(float *p, size_t n, uint32_t seed, float scale, cudaStream_t stream);
void fillRandom(__nv_bfloat16 *p, size_t n, uint32_t seed, float scale, cudaStream_t stream);
/// Integers in [0, bound) (token ids, targets).
void fillRandomInts(int32_t *p, size_t n, uint32_t seed, int32_t bound, cudaStream_t stream);
/// A kernel that keeps one SM busy for `microseconds` of wall time: a gate
/// that holds back the work queued behind it, so that work on several
/// streams starts together.
void spinFor(double microseconds, cudaStream_t stream);

} // namespace mist::profiler
