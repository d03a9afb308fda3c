//===- HostDevice.cpp - Device.h on CPU ranks: memory and copies ----------===//
/// \file
/// On CPU ranks the device is the host: memory is aligned host memory and
/// copies are memmove; streams and events are HostStreams.cpp's.
//===----------------------------------------------------------------------===//
#include "runtime/device/Device.h"

#include "runtime/comm/MpiCommunicator.h"
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <malloc.h>
#include <mutex>
#include <unordered_map>

namespace mist::rt::device {

namespace {

/// Sizes of the live allocations of one kind, for bytesInUse and peakBytes
/// (and the op staging's, kept apart).
struct Accounting {
  std::mutex lock;
  std::unordered_map<void *, size_t> sizes;
  size_t inUse = 0, peak = 0;
  void add(void *p, size_t bytes) { // with `lock` held
    sizes[p] = bytes;
    inUse += bytes;
    peak = std::max(peak, inUse);
  }
  void remove(void *p) {
    std::lock_guard<std::mutex> guard(lock);
    auto it = sizes.find(p);
    if (it != sizes.end()) {
      inUse -= it->second;
      sizes.erase(it);
    }
  }
};
Accounting &accounting() {
  static Accounting a; // the process's one device, like the GPU's own allocator
  return a;
}
Accounting &staging() {
  static Accounting s; // Fp32Staging's copies, not part of the modelled tensors
  return s;
}

void *alignedAllocate(size_t bytes) {
  const size_t rounded = std::max<size_t>(64, (bytes + 63) / 64 * 64);
  return std::aligned_alloc(64, rounded);
}

} // namespace

const char *backendName() { return "cpu"; }

std::string initialize(int) {
  // Freed memory stays mapped for the next allocation, as a GPU's caching
  // allocator keeps it. Without this glibc hands blocks above its mmap and
  // trim thresholds back to the kernel at every free (GEMM workspaces,
  // the ops' scratch), and each step then spends about a tenth
  // of its time in page faults on fresh zeroed pages (perf, on the GPT of
  // bench/cpu/vs-pytorch.sh). 32 MiB is glibc's largest mmap threshold.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  return "CPU";
}

void *allocate(size_t bytes, const char *what) {
  if (bytes == 0)
    return nullptr;
  void *p = alignedAllocate(bytes);
  Accounting &a = accounting();
  std::lock_guard<std::mutex> guard(a.lock);
  if (!p)
    abortJob(std::string("out of memory allocating ") + what + ": " +
             std::to_string(double(bytes) / (1 << 20)) + " MiB requested, " +
             std::to_string(double(a.inUse) / (1 << 20)) + " MiB in use");
  a.add(p, bytes);
  return p;
}

void release(void *p) {
  if (!p)
    return;
  accounting().remove(p);
  std::free(p);
}

void *allocatePinned(size_t bytes, const char *what) {
  void *p = alignedAllocate(bytes);
  if (!p)
    abortJob(std::string("out of host memory allocating ") + what + ": " +
             std::to_string(double(bytes) / (1 << 20)) + " MiB requested");
  return p;
}

void releasePinned(void *p) { std::free(p); }

size_t bytesInUse() { return accounting().inUse; }
size_t peakBytes() { return accounting().peak; }
size_t deviceReportedBytesInUse() { return 0; }

void copy(void *dst, const void *src, size_t bytes) {
  if (bytes)
    std::memmove(dst, src, bytes);
}

void copyRows(void *dst, size_t dstPitch, const void *src, size_t srcPitch, size_t rowBytes,
              size_t rows) {
  if (rowBytes == 0)
    return;
  for (size_t r = 0; r < rows; ++r)
    std::memcpy(static_cast<char *>(dst) + r * dstPitch,
                static_cast<const char *>(src) + r * srcPitch, rowBytes);
}

void fill(float *dst, size_t n, float value) { std::fill(dst, dst + n, value); }
void fillIds(int32_t *dst, size_t n, int32_t value) { std::fill(dst, dst + n, value); }

void fillZero(void *dst, size_t bytes) {
  if (bytes)
    std::memset(dst, 0, bytes);
}

namespace {
float load(ConstTensor t, size_t i) {
  return t.dtype == DType::F32 ? static_cast<const float *>(t.data)[i]
                               : fromBf16(static_cast<const uint16_t *>(t.data)[i]);
}
void store(Tensor t, size_t i, float x) {
  if (t.dtype == DType::F32)
    static_cast<float *>(t.data)[i] = x;
  else
    static_cast<uint16_t *>(t.data)[i] = toBf16(x);
}
} // namespace

void accumulate(Tensor dst, ConstTensor src, size_t n) {
  for (size_t i = 0; i < n; ++i)
    store(dst, i, load(dst, i) + load(src, i));
}

void accumulateSquares(double *sum, ConstTensor x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) {
    const double v = load(x, i);
    s += v * v;
  }
  *sum += s;
}

void convert(Tensor dst, ConstTensor src, size_t n) {
  if (dst.dtype == src.dtype) {
    copy(dst.data, src.data, n * bytesOf(dst.dtype));
    return;
  }
  for (size_t i = 0; i < n; ++i)
    store(dst, i, load(src, i));
}

void *allocateStaging(size_t bytes) {
  if (bytes == 0)
    return nullptr;
  void *p = alignedAllocate(bytes);
  if (!p)
    abortJob("out of memory staging an op's operands in fp32: " +
             std::to_string(double(bytes) / (1 << 20)) + " MiB requested");
  Accounting &s = staging();
  std::lock_guard<std::mutex> guard(s.lock);
  s.add(p, bytes);
  return p;
}

void releaseStaging(void *p) {
  if (!p)
    return;
  staging().remove(p);
  std::free(p);
}

size_t stagingPeakBytes() { return staging().peak; }

} // namespace mist::rt::device
