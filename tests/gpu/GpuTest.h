//===- GpuTest.h - What every GPU kernel test needs -----------------------===//
/// \file
/// The GPU tests are plain programs (no GoogleTest in device code): each
/// calls `requireGpu()` first, which exits 77 (CTest: skipped) when there is
/// no usable device, checks CUDA calls with CHECK_CUDA, uploads random
/// inputs, runs a kernel and its CPU reference, and compares with
/// `expectClose`, which counts failures; main returns `finish()`.
//===----------------------------------------------------------------------===//
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <random>
#include <string>
#include <vector>

namespace mist::gputest {

#define CHECK_CUDA(call)                                                                           \
  do {                                                                                             \
    cudaError_t err_ = (call);                                                                     \
    if (err_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,                           \
                   cudaGetErrorString(err_));                                                      \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)

inline int &failures() {
  static int count = 0;
  return count;
}

/// Exits 77 unless a CUDA device can be used.
inline void requireGpu() {
  int devices = 0;
  cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf("no GPU (%s); skipped\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "no device");
    std::exit(77);
  }
}

inline std::vector<float> randomVector(size_t n, unsigned seed, float scale = 1.f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.f, scale);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

/// A device copy of a host vector, freed with the object.
template <typename T> struct DeviceBuffer {
  T *ptr = nullptr;
  size_t n = 0;
  explicit DeviceBuffer(size_t count) : n(count) {
    CHECK_CUDA(cudaMalloc(&ptr, std::max<size_t>(count, 1) * sizeof(T)));
    CHECK_CUDA(cudaMemset(ptr, 0, std::max<size_t>(count, 1) * sizeof(T)));
  }
  explicit DeviceBuffer(const std::vector<T> &host) : DeviceBuffer(host.size()) {
    CHECK_CUDA(cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  std::vector<T> download() const {
    std::vector<T> host(n);
    CHECK_CUDA(cudaMemcpy(host.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
};

/// Every |got - want| <= atol + rtol |want|; prints the worst element.
inline void expectClose(const std::string &what, const std::vector<float> &got,
                        const std::vector<float> &want, float rtol, float atol) {
  size_t worst = 0;
  double worstExcess = -1;
  bool ok = got.size() == want.size();
  for (size_t i = 0; ok && i < want.size(); ++i) {
    double excess = std::fabs(double(got[i]) - want[i]) - (atol + rtol * std::fabs(want[i]));
    if (!std::isfinite(got[i]) || excess > 0)
      ok = false;
    if (excess > worstExcess || !std::isfinite(got[i])) {
      worstExcess = excess;
      worst = i;
    }
  }
  if (ok) {
    std::printf("ok   %s (%zu values)\n", what.c_str(), want.size());
    return;
  }
  ++failures();
  if (got.size() != want.size())
    std::printf("FAIL %s: %zu values, expected %zu\n", what.c_str(), got.size(), want.size());
  else
    std::printf("FAIL %s: element %zu is %g, expected %g\n", what.c_str(), worst, got[worst],
                want[worst]);
}

/// Each value rounded to the nearest bf16 (ties to even), kept as a float.
inline std::vector<float> roundedToBf16(std::vector<float> v) {
  for (float &x : v)
    x = __bfloat162float(__float2bfloat16_rn(x));
  return v;
}

inline std::vector<__nv_bfloat16> toBf16(const std::vector<float> &v) {
  std::vector<__nv_bfloat16> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = __float2bfloat16_rn(v[i]);
  return out;
}

inline std::vector<float> toFloat(const std::vector<__nv_bfloat16> &v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = __bfloat162float(v[i]);
  return out;
}

inline int finish() {
  if (failures())
    std::printf("%d check(s) failed\n", failures());
  return failures() ? 1 : 0;
}

} // namespace mist::gputest
