//===- Device.h - The memory and streams a rank's tensors live on ---------===//
/// \file
/// The trainer's runtime is written once against this interface and linked
/// to one of two implementations:
/// - HostDevice.cpp and HostStreams.cpp (CPU ranks): "device" memory is
///   host memory; a concurrent stream is a worker thread with a queue, the
///   others run work at once in program order; events are host timestamps;
/// - CudaDevice.cpp (GPU ranks): cudaMalloc'd memory, one CUDA stream per
///   StreamKind of runtime/trainer/Streams.h, CUDA events, pinned host memory.
/// So every line of the runtime that runs on CPU ranks in the tests (ZeRO,
/// offload, pipelines, checkpoints) is the line that runs on a GPU; only
/// the primitives below and the ops (runtime/ops/Ops.h) differ.
///
/// Rules for code above this layer: a pointer from `allocate` (and every
/// Frame buffer) is device memory: never dereference it on the host; move
/// bytes with `copy`, which is asynchronous on the current stream, and call
/// `synchronize` before reading a host destination. Host buffers that take
/// part in copies come from `allocatePinned` (HostArray), so GPU copies of
/// them overlap compute.
///
/// The current stream is per thread (as CUDA's own current device is): the
/// runtime drives a device from one thread, and `launch` sets it around
/// each piece of work so that the ops the work calls go there. On GPUs the
/// work runs at once on the calling thread and only enqueues; on a CPU
/// rank's concurrent stream the work itself is queued, so it must own what
/// it captures (or the caller must wait for an event recorded after it).
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "runtime/device/Tensor.h"

namespace mist::rt::device {

/// What this binary runs on: "cpu" or "cuda".
const char *backendName();
/// Picks the device of a rank (GPU ranks: local rank modulo the node's GPUs)
/// and returns its name ("CPU", "NVIDIA H100 80GB HBM3"); call once, first.
std::string initialize(int localRank);

/// `bytes` of device memory (64-byte aligned, contents undefined); on
/// failure ends the job with `what`, the size and the memory in use.
void *allocate(size_t bytes, const char *what);
void release(void *p);
/// Pinned host memory (on CPU ranks, ordinary aligned memory).
void *allocatePinned(size_t bytes, const char *what);
void releasePinned(void *p);
/// Bytes of device memory allocated now, and the most at once since start.
size_t bytesInUse();
size_t peakBytes();
/// What the device itself reports in use now (total minus free): the
/// allocations above and all else on it (the CUDA context, cuBLASLt's and
/// cuDNN's workspaces, the caching allocator's free blocks, other
/// processes). 0 where there is no such report (CPU ranks).
size_t deviceReportedBytesInUse();

/// Opaque stream and event handles (cudaStream_t / cudaEvent_t on GPUs).
using Stream = void *;
using EventHandle = void *;
/// A stream. `concurrent` matters on CPU ranks only: such a stream runs its
/// work on a thread of its own; the others run it at once on the calling
/// thread (GPU streams are always concurrent with the host).
Stream createStream(bool concurrent = true);
void destroyStream(Stream s);
/// Runs `work` as `s`'s next piece of work, with `s` current for the ops it
/// calls: at once on GPUs and on CPU ranks' other streams, after the work
/// queued before it on a concurrent CPU stream (`work` is copied there).
void launch(Stream s, const std::function<void()> &work);
/// The stream the ops and copies of this thread are enqueued on; null is
/// the default stream.
Stream currentStream();
void setCurrentStream(Stream s);

EventHandle createEvent();
void destroyEvent(EventHandle e);
void recordEvent(EventHandle e, Stream s);
/// Later work on `s` starts after the work `e` marks.
void waitEvent(Stream s, EventHandle e);
/// Milliseconds from `from` to `to` (both recorded; waits for `to`).
double elapsedMs(EventHandle from, EventHandle to);
void synchronizeStream(Stream s);
void synchronizeDevice();

/// Copies `bytes` between any two of device and pinned/host memory, on the
/// current stream (asynchronous on GPUs).
void copy(void *dst, const void *src, size_t bytes);
/// Copies `rows` rows of `rowBytes` bytes each from `src`, whose rows start
/// `srcPitch` bytes apart, to `dst`, whose rows start `dstPitch` bytes
/// apart (a strided 2-D copy, as cudaMemcpy2D), on the current stream. The
/// two ranges must not overlap.
void copyRows(void *dst, size_t dstPitch, const void *src, size_t srcPitch, size_t rowBytes,
              size_t rows);
/// dst[0..n) = value, on the current stream.
void fill(float *dst, size_t n, float value);
void fillIds(int32_t *dst, size_t n, int32_t value);
/// `bytes` of zeros at dst (zero is all-zero bits in every DType), on the current stream.
void fillZero(void *dst, size_t bytes);
/// dst[i] += src[i] (any DTypes; the sum in fp32, rounded to dst's type), on the current stream.
void accumulate(Tensor dst, ConstTensor src, size_t n);
/// *sum (device memory, one double) += the sum of x[i]^2, on the current stream.
void accumulateSquares(double *sum, ConstTensor x, size_t n);
/// dst[i] = src[i] converted to dst's type (bf16: rounded to nearest even).
void convert(Tensor dst, ConstTensor src, size_t n);

/// Transient memory for ops whose kernels compute in fp32 on bf16 tensors
/// (runtime/ops/Fp32Staging.h): an fp32 copy of an operand for the length
/// of one op. It is not part of the tensors the performance model counts,
/// so it is kept out of bytesInUse / peakBytes and reported on its own.
void *allocateStaging(size_t bytes);
void releaseStaging(void *p);
size_t stagingPeakBytes();

} // namespace mist::rt::device
