//===- CudaDevice.cpp - Device.h on GPU ranks: CUDA memory and streams ----===//
/// \file
/// The GPU implementation of Device.h over the CUDA runtime API (plain C++;
/// the four small kernels are in CudaDeviceKernels.cu). Every CUDA error
/// ends the job (abortJob, which names the rank) with the call's name and
/// cudaGetErrorString: a rank that goes on after a failed call would only
/// fail later, further from the cause, or hang its peers.
///
/// Memory comes from a caching allocator, because cudaFree synchronizes the
/// whole device: a step that freed and re-allocated its activations through
/// cudaMalloc / cudaFree would stall every stream at each release. The
/// trainer allocates the same sizes every step, so exact-size free lists
/// (after rounding) serve the steady state without a single cudaMalloc.
//===----------------------------------------------------------------------===//
#include "runtime/device/Device.h"

#include "runtime/comm/MpiCommunicator.h"
#include "runtime/device/CudaDeviceKernels.h"
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cuda_runtime_api.h>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mist::rt::device {

namespace {

void check(cudaError_t rc, const char *call) {
  if (rc != cudaSuccess)
    abortJob(std::string(call) + " failed: " + cudaGetErrorString(rc));
}

cudaStream_t cudaStreamOf(Stream s) { return static_cast<cudaStream_t>(s); }
cudaEvent_t cudaEventOf(EventHandle e) { return static_cast<cudaEvent_t>(e); }

std::string mib(size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", double(bytes) / double(size_t(1) << 20));
  return text;
}

/// The current stream is per thread, the model CUDA itself uses for the
/// current device: the runtime drives the device from one thread, and
/// Streams::run sets the stream around each piece of work, so the ops and
/// copies that work calls are enqueued there without taking a stream
/// argument. Null is the default stream.
thread_local Stream current = nullptr;

/// Requests are rounded up so that nearly equal sizes share blocks: to 512
/// bytes up to 1 MiB, to 2 MiB above, which is the granularity cudaMalloc
/// itself reserves large blocks in, so the rounding costs no memory that
/// cudaMalloc would not have spent anyway.
size_t roundUp(size_t bytes) {
  const size_t unit = bytes <= (size_t(1) << 20) ? 512 : size_t(2) << 20;
  return (bytes + unit - 1) / unit * unit;
}

/// The current device's default memory pool (where cudaMallocAsync takes
/// memory), or null where the device has no memory pools.
cudaMemPool_t defaultPool() {
  int device = 0, supported = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device),
        "cudaDeviceGetAttribute");
  if (!supported)
    return nullptr;
  cudaMemPool_t pool = nullptr;
  check(cudaDeviceGetDefaultMemPool(&pool, device), "cudaDeviceGetDefaultMemPool");
  return pool;
}

/// A caching allocator with one free list per rounded size.
///
/// When a block may be reused: GPU work is asynchronous, so when release(p)
/// is called, kernels using p may still be queued or running. A release is
/// therefore stream-ordered, as cudaFreeAsync is, on the releasing thread's
/// current stream: the caller guarantees that every use of p is ordered
/// before any work enqueued later on that stream (it ran on that stream, or
/// the stream waited for an event recorded after it). The runtime keeps this
/// rule: work frees what it used on the stream it runs on, and cross-stream
/// uses are ordered through events. Hence a released block goes to the free
/// list of (current stream, size), with an event recorded on that stream:
///   - an allocation made while the same stream is current takes it as it is
///     (its work runs after the old uses);
///   - an allocation on another stream takes it once the event has completed,
///     or else makes its stream wait for the event (cudaStreamWaitEvent) and
///     takes it: the trainer allocates on one stream what it frees on
///     another every micro-batch (ZeRO-3 gathers weights on g2g and frees them
///     on compute, ZeRO-2 the other way for gradients, offload on h2d/d2h
///     against compute), and without this those blocks stayed unusable until
///     the step's end, so the memory reserved grew with G and a failed
///     cudaMalloc synchronized the whole device mid-step.
/// After synchronizeDevice (the runtime synchronizes the device at the end of
/// every step) no old use is left anywhere, and every released block becomes
/// reusable from any stream without waiting.
///
/// Blocks are returned to CUDA only when cudaMalloc fails: then the device
/// is synchronized, every cached block is cudaFree'd, and the cudaMalloc is
/// retried once. A second failure ends the job.
class CachingAllocator {
public:
  void *allocate(size_t bytes, const char *what) {
    if (bytes == 0)
      return nullptr;
    const size_t rounded = roundUp(bytes);
    std::lock_guard<std::mutex> guard(lock);
    void *p = takeCached(rounded);
    if (!p)
      p = allocateNew(rounded, bytes, what);
    live.emplace(p, Block{bytes, rounded});
    inUse += bytes;
    peak = std::max(peak, inUse);
    return p;
  }

  void release(void *p) {
    if (!p)
      return;
    std::lock_guard<std::mutex> guard(lock);
    auto it = live.find(p);
    if (it == live.end())
      abortJob("device::release of a pointer that device::allocate did not return (or that "
               "was released already)");
    inUse -= it->second.bytes;
    cudaEvent_t done = takeEvent();
    check(cudaEventRecord(done, static_cast<cudaStream_t>(current)), "cudaEventRecord");
    released[{current, it->second.rounded}].push_back({p, done});
    live.erase(it);
  }

  /// Called after cudaDeviceSynchronize: every released block is idle.
  void deviceSynchronized() {
    std::lock_guard<std::mutex> guard(lock);
    for (auto &[key, blocks] : released)
      for (const Freed &f : blocks) {
        idle[key.second].push_back(f.p);
        spareEvents.push_back(f.done);
      }
    released.clear();
    for (auto &[rounded, p] : orphaned)
      idle[rounded].push_back(p);
    orphaned.clear();
  }

  /// The blocks released on `s` wait for the next device synchronization:
  /// a stream created later may get the same handle, but not the ordering
  /// the old stream's uses relied on.
  void streamDestroyed(Stream s) {
    std::lock_guard<std::mutex> guard(lock);
    for (auto it = released.begin(); it != released.end();) {
      if (it->first.first != s) {
        ++it;
        continue;
      }
      for (const Freed &f : it->second) {
        orphaned.emplace_back(it->first.second, f.p);
        spareEvents.push_back(f.done);
      }
      it = released.erase(it);
    }
  }

  size_t bytesInUse() {
    std::lock_guard<std::mutex> guard(lock);
    return inUse;
  }
  size_t peakBytes() {
    std::lock_guard<std::mutex> guard(lock);
    return peak;
  }

private:
  struct Block {
    size_t bytes;   ///< as requested: what bytesInUse counts, as HostDevice does
    size_t rounded; ///< as cudaMalloc'd: the free list it returns to
  };

  /// A block released on a stream, and the event recorded there at release.
  struct Freed {
    void *p;
    cudaEvent_t done;
  };

  cudaEvent_t takeEvent() {
    if (!spareEvents.empty()) {
      cudaEvent_t e = spareEvents.back();
      spareEvents.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    return e;
  }

  /// The last block of `blocks`, its event back to the spares.
  void *pop(std::vector<Freed> &blocks) {
    Freed f = blocks.back();
    blocks.pop_back();
    spareEvents.push_back(f.done);
    return f.p;
  }

  /// A cached block of `rounded` bytes that work enqueued from now on the
  /// current stream may use: one released on this stream, an idle one, one
  /// released on another stream whose uses are over, or, failing those, one
  /// released on another stream after making this stream wait for its uses.
  void *takeCached(size_t rounded) {
    if (auto it = released.find({current, rounded}); it != released.end() && !it->second.empty())
      return pop(it->second);
    if (auto it = idle.find(rounded); it != idle.end() && !it->second.empty()) {
      void *p = it->second.back();
      it->second.pop_back();
      return p;
    }
    std::vector<Freed> *waitable = nullptr;
    for (auto &[key, blocks] : released) {
      if (key.second != rounded || key.first == current || blocks.empty())
        continue;
      cudaError_t state = cudaEventQuery(blocks.back().done);
      if (state == cudaSuccess)
        return pop(blocks);
      if (state != cudaErrorNotReady)
        check(state, "cudaEventQuery");
      waitable = &blocks;
    }
    if (!waitable)
      return nullptr;
    // The wait is on the event's record as it stands now: the event may be
    // recorded again for another block once this call has returned.
    check(cudaStreamWaitEvent(static_cast<cudaStream_t>(current), waitable->back().done, 0),
          "cudaStreamWaitEvent");
    return pop(*waitable);
  }

  void *allocateNew(size_t rounded, size_t bytes, const char *what) {
    void *p = nullptr;
    cudaError_t rc = cudaMalloc(&p, rounded);
    if (rc == cudaErrorMemoryAllocation) {
      cudaGetLastError(); // not sticky: clear it, or the next launch check would report it
      freeCached();
      rc = cudaMalloc(&p, rounded);
    }
    if (rc == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      size_t freeBytes = 0, totalBytes = 0;
      std::string device = cudaMemGetInfo(&freeBytes, &totalBytes) == cudaSuccess
                               ? "; the GPU has " + mib(freeBytes) + " free of " + mib(totalBytes)
                               : "";
      abortJob(std::string("out of GPU memory allocating ") + what + ": " + mib(bytes) +
               " requested, " + mib(inUse) + " in use, peak " + mib(peak) + device);
    }
    check(rc, "cudaMalloc");
    return p;
  }

  /// Gives every cached block back to CUDA (after the work using them).
  void freeCached() {
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    // What the stream-ordered pool keeps (initialize) goes back too.
    if (cudaMemPool_t pool = defaultPool())
      check(cudaMemPoolTrimTo(pool, 0), "cudaMemPoolTrimTo");
    for (auto &[key, blocks] : released)
      for (const Freed &f : blocks) {
        check(cudaFree(f.p), "cudaFree");
        spareEvents.push_back(f.done);
      }
    for (auto &[rounded, blocks] : idle)
      for (void *p : blocks)
        check(cudaFree(p), "cudaFree");
    for (auto &[rounded, p] : orphaned)
      check(cudaFree(p), "cudaFree");
    released.clear();
    idle.clear();
    orphaned.clear();
  }

  std::mutex lock;
  std::unordered_map<void *, Block> live;
  /// Released blocks by (the stream current at release, rounded size).
  std::map<std::pair<Stream, size_t>, std::vector<Freed>> released;
  /// Events no released block holds, for the next release (an event per
  /// release would create and destroy hundreds a step).
  std::vector<cudaEvent_t> spareEvents;
  /// Blocks no work uses any more, by rounded size: reusable from any stream.
  std::unordered_map<size_t, std::vector<void *>> idle;
  /// (rounded size, block) released on a stream destroyed since.
  std::vector<std::pair<size_t, void *>> orphaned;
  size_t inUse = 0, peak = 0;
};

CachingAllocator &allocator() {
  // Never destroyed: a destructor freeing blocks at exit could run after the
  // CUDA runtime has been torn down.
  static CachingAllocator *a = new CachingAllocator();
  return *a;
}

} // namespace

const char *backendName() { return "cuda"; }

std::string initialize(int localRank) {
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count == 0)
    abortJob(std::string("this trainer was built for GPUs (backend cuda), but no CUDA device "
                         "is usable: ") +
             (rc != cudaSuccess ? cudaGetErrorString(rc) : "no device found"));
  if (localRank < 0)
    abortJob("device::initialize: negative local rank " + std::to_string(localRank));
  // One visible GPU per rank (a launcher's per-task CUDA_VISIBLE_DEVICES):
  // that one. Several: the host's ranks take one each, and more ranks than
  // GPUs is an error here rather than two ranks on one GPU (NCCL refuses a
  // communicator with a GPU twice, with a less clear message, later).
  if (count > 1 && localRank >= count)
    abortJob("rank " + std::to_string(localRank) + " of this host has no GPU of its own: " +
             std::to_string(count) + " are visible; start at most " + std::to_string(count) +
             " ranks per host (or give each rank one GPU with CUDA_VISIBLE_DEVICES)");
  const int device = count == 1 ? 0 : localRank;
  check(cudaSetDevice(device), "cudaSetDevice");
  // Stream-ordered allocations (op staging, the bias gradient's partials)
  // come from the device's default pool, which by default gives its memory
  // back at every synchronization, so each step mapped it anew: keep it, and
  // trim it only when cudaMalloc runs out (freeCached).
  if (cudaMemPool_t pool = defaultPool()) {
    uint64_t keepAll = UINT64_MAX;
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keepAll),
          "cudaMemPoolSetAttribute");
  }
  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties");
  return properties.name;
}

void *allocate(size_t bytes, const char *what) { return allocator().allocate(bytes, what); }
void release(void *p) { allocator().release(p); }

void *allocatePinned(size_t bytes, const char *what) {
  if (bytes == 0)
    return nullptr;
  void *p = nullptr;
  if (cudaError_t rc = cudaMallocHost(&p, bytes); rc != cudaSuccess) {
    cudaGetLastError();
    abortJob(std::string("cannot allocate pinned host memory for ") + what + ": " + mib(bytes) +
             " requested: " + cudaGetErrorString(rc));
  }
  return p;
}

void releasePinned(void *p) {
  if (p)
    check(cudaFreeHost(p), "cudaFreeHost");
}

size_t bytesInUse() { return allocator().bytesInUse(); }
size_t peakBytes() { return allocator().peakBytes(); }
size_t deviceReportedBytesInUse() {
  size_t freeBytes = 0, totalBytes = 0;
  return cudaMemGetInfo(&freeBytes, &totalBytes) == cudaSuccess ? totalBytes - freeBytes : 0;
}

Stream createStream(bool) {
  // Non-blocking: the streams must not serialize with the legacy default
  // stream, or compute, collectives and copies could not overlap.
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  return s;
}

void destroyStream(Stream s) {
  if (!s)
    return;
  allocator().streamDestroyed(s);
  check(cudaStreamDestroy(cudaStreamOf(s)), "cudaStreamDestroy");
}

Stream currentStream() { return current; }
void setCurrentStream(Stream s) { current = s; }

void launch(Stream s, const std::function<void()> &work) {
  const Stream previous = current;
  current = s;
  work(); // enqueues its kernels and copies on `s`
  current = previous;
}

EventHandle createEvent() {
  cudaEvent_t e = nullptr;
  check(cudaEventCreate(&e), "cudaEventCreate"); // timing enabled: elapsedMs needs it
  return e;
}

void destroyEvent(EventHandle e) {
  if (e)
    check(cudaEventDestroy(cudaEventOf(e)), "cudaEventDestroy");
}

void recordEvent(EventHandle e, Stream s) {
  check(cudaEventRecord(cudaEventOf(e), cudaStreamOf(s)), "cudaEventRecord");
}

void waitEvent(Stream s, EventHandle e) {
  check(cudaStreamWaitEvent(cudaStreamOf(s), cudaEventOf(e), 0), "cudaStreamWaitEvent");
}

double elapsedMs(EventHandle from, EventHandle to) {
  // Both must have completed (they may be on different streams).
  check(cudaEventSynchronize(cudaEventOf(from)), "cudaEventSynchronize");
  check(cudaEventSynchronize(cudaEventOf(to)), "cudaEventSynchronize");
  float ms = 0.f;
  check(cudaEventElapsedTime(&ms, cudaEventOf(from), cudaEventOf(to)), "cudaEventElapsedTime");
  return ms;
}

void synchronizeStream(Stream s) {
  check(cudaStreamSynchronize(cudaStreamOf(s)), "cudaStreamSynchronize");
}

void synchronizeDevice() {
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  allocator().deviceSynchronized();
}

void copy(void *dst, const void *src, size_t bytes) {
  if (bytes == 0)
    return;
  // cudaMemcpyDefault: unified addressing tells device from host pointers.
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, cudaStreamOf(current)),
        "cudaMemcpyAsync");
}

void copyRows(void *dst, size_t dstPitch, const void *src, size_t srcPitch, size_t rowBytes,
              size_t rows) {
  if (rowBytes == 0 || rows == 0)
    return;
  check(cudaMemcpy2DAsync(dst, dstPitch, src, srcPitch, rowBytes, rows, cudaMemcpyDefault,
                          cudaStreamOf(current)),
        "cudaMemcpy2DAsync");
}

void fill(float *dst, size_t n, float value) {
  check(cuda::launchFill(dst, n, value, cudaStreamOf(current)), "device::fill (kernel launch)");
}

void fillIds(int32_t *dst, size_t n, int32_t value) {
  check(cuda::launchFillIds(dst, n, value, cudaStreamOf(current)),
        "device::fillIds (kernel launch)");
}

void fillZero(void *dst, size_t bytes) {
  if (bytes)
    check(cudaMemsetAsync(dst, 0, bytes, cudaStreamOf(current)), "cudaMemsetAsync");
}

void accumulate(Tensor dst, ConstTensor src, size_t n) {
  check(cuda::launchAccumulate(dst, src, n, cudaStreamOf(current)),
        "device::accumulate (kernel launch)");
}

void accumulateSquares(double *sum, ConstTensor x, size_t n) {
  check(cuda::launchAccumulateSquares(sum, x, n, cudaStreamOf(current)),
        "device::accumulateSquares (kernel launch)");
}

void convert(Tensor dst, ConstTensor src, size_t n) {
  if (dst.dtype == src.dtype) {
    copy(dst.data, src.data, n * bytesOf(dst.dtype));
    return;
  }
  check(cuda::launchConvert(dst, src, n, cudaStreamOf(current)), "device::convert (kernel launch)");
}

namespace {
std::atomic<size_t> stagingInUse{0}, stagingPeak{0};
std::mutex stagingLock;
std::unordered_map<void *, size_t> stagingSizes;
} // namespace

// Stream-ordered, so the staging of one op is reused by the next op on the
// same stream without a host synchronization.
void *allocateStaging(size_t bytes) {
  if (bytes == 0)
    return nullptr;
  void *p = nullptr;
  check(cudaMallocAsync(&p, bytes, cudaStreamOf(current)), "cudaMallocAsync (op staging)");
  std::lock_guard<std::mutex> guard(stagingLock);
  stagingSizes[p] = bytes;
  const size_t now = stagingInUse += bytes;
  stagingPeak = std::max(stagingPeak.load(), now);
  return p;
}

void releaseStaging(void *p) {
  if (!p)
    return;
  check(cudaFreeAsync(p, cudaStreamOf(current)), "cudaFreeAsync (op staging)");
  std::lock_guard<std::mutex> guard(stagingLock);
  auto it = stagingSizes.find(p);
  if (it != stagingSizes.end()) {
    stagingInUse -= it->second;
    stagingSizes.erase(it);
  }
}

size_t stagingPeakBytes() { return stagingPeak; }

} // namespace mist::rt::device
