//===- RandomFill.cu - Random device data and a gate kernel ---------------===//
#include "tools/profiler/DeviceBuffer.h"

#include <algorithm>

namespace mist::profiler {

namespace {

__device__ uint32_t hash(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

__device__ float uniform(size_t i, uint32_t seed) {
  uint32_t h = hash(static_cast<uint32_t>(i) ^ hash(seed ^ static_cast<uint32_t>(i >> 32)));
  return (h >> 8) * (1.0f / 16777216.0f) * 2.f - 1.f; // [-1, 1)
}

__global__ void fillFloat(float *p, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    p[i] = scale * uniform(i, seed);
}

__global__ void fillBf16(__nv_bfloat16 *p, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    p[i] = __float2bfloat16(scale * uniform(i, seed));
}

__global__ void fillInt(int32_t *p, size_t n, uint32_t seed, int32_t bound) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    p[i] = static_cast<int32_t>(hash(static_cast<uint32_t>(i) * 2654435761U ^ seed) %
                                static_cast<uint32_t>(bound));
}

__global__ void spin(unsigned long long nanoseconds) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < nanoseconds);
}

unsigned blocksFor(size_t n) {
  return static_cast<unsigned>(std::min<size_t>((n + 255) / 256, 65535) + (n == 0));
}

} // namespace

void fillRandom(float *p, size_t n, uint32_t seed, float scale, cudaStream_t stream) {
  fillFloat<<<blocksFor(n), 256, 0, stream>>>(p, n, seed, scale);
  checkCuda(cudaGetLastError(), "fill kernel");
}

void fillRandom(__nv_bfloat16 *p, size_t n, uint32_t seed, float scale, cudaStream_t stream) {
  fillBf16<<<blocksFor(n), 256, 0, stream>>>(p, n, seed, scale);
  checkCuda(cudaGetLastError(), "fill kernel");
}

void fillRandomInts(int32_t *p, size_t n, uint32_t seed, int32_t bound, cudaStream_t stream) {
  fillInt<<<blocksFor(n), 256, 0, stream>>>(p, n, seed, bound > 0 ? bound : 1);
  checkCuda(cudaGetLastError(), "fill kernel");
}

void spinFor(double microseconds, cudaStream_t stream) {
  spin<<<1, 1, 0, stream>>>(static_cast<unsigned long long>(microseconds * 1e3));
  checkCuda(cudaGetLastError(), "spin kernel");
}

} // namespace mist::profiler
