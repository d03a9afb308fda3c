//===- CpuOpTimer.h - Time one IR op at one shape with the CPU ops ---------===//
/// \file
/// The CPU counterpart of OpTimer: maps an entry of a shapes file to the
/// call the trainer makes for that op on a CPU rank (runtime/ops/Ops.h over
/// the reference kernels of stdlib/kernels), on random host data of that
/// shape, and times it with the steady clock (median of N after warm-up, in
/// seven fresh sets of buffers, the median of those).
/// Its table makes the performance model predict the CPU trainer, which is
/// how the time model is checked without a GPU (bench/time/).
///
/// Each call starts with the caches as the trainer's step leaves them for
/// that op: the step runs its ops back to back over far more data than one
/// op touches, so an op finds in the caches only the activation the ops just
/// before it wrote (a GEMM's input, a backward op's incoming gradient, the
/// inputs of an elementwise op), while the weights, what the backward reads
/// from the forward and the buffers it writes come from memory; a bf16 op's
/// fp32 staging copies get the memory the op before freed, in the caches.
/// Before every call (untimed) the timer evicts the caches by writing a
/// buffer twice the size of the largest one, then reads those inputs back
/// (and writes as much free memory as the op will stage). Timed with its
/// buffers all in the caches, as a loop over one call leaves them, an op
/// ran 5-10% faster than in the step (GEMMs 5-15%, elementwise ops up to
/// 2x; per-op timings of the trainer's step, bench/time/cpu-time.sh); timed
/// so, the GEMMs, norms and attention are within a few percent of the
/// step's. For the small models of bench/time, whose whole step (13-32 MiB)
/// about fits the last-level cache, part of what this reads from memory is
/// in that cache in the step, so there the figures run 0-5% slow.
///
/// Every op of the shapes file has a CPU call, except `position_embedding`
/// (its key is the table alone, without the micro-batch) and those that run
/// nothing (dropout at p = 0, tp_copy, all_reduce at tp = 1, which the
/// shapes file does not list); cross_entropy is the trainer's three phases
/// at tp = 1, and attention takes any head dim.
//===----------------------------------------------------------------------===//
#pragma once

#include "tools/profiler/ProfileInputs.h"
#include "tools/profiler/ShapesFile.h"

#include "runtime/device/DType.h"

#include <functional>
#include <string>

namespace mist::profiler {

/// The median wall time of `run` over `repeats` calls after `warmup` calls;
/// `before`, where given, runs (untimed) before each call.
double medianHostSeconds(int warmup, int repeats, const std::function<void()> &run,
                         const std::function<void()> &before = {});

/// Bytes the timer writes to evict the caches: twice the largest cache of
/// CPU 0 (sysfs), 64 MiB where it is not known.
size_t cacheEvictionBytes();

/// Times `e` with the CPU ops, weights and activations of type `dtype`
/// (statistics, the loss and weight gradients fp32, as a plan with the
/// default grad_dtype keeps them), the caches as the step leaves them (see
/// above); never throws. `sync`, where given, runs right before each call,
/// after the caches are prepared: under mpirun a barrier, so that every
/// rank's call runs at the same moment as in the trainer's step, where the
/// ranks of a node compute at once and share its caches and memory.
OpTime timeOpOnCpu(const ShapeEntry &e, int warmup, int repeats,
                   mist::rt::DType dtype = mist::rt::DType::F32,
                   const std::function<void()> &sync = {});

} // namespace mist::profiler
