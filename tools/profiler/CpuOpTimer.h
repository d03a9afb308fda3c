//===- CpuOpTimer.h - Time one IR op at one shape with the CPU ops ---------===//
/// \file
/// The CPU counterpart of OpTimer: maps an entry of a shapes file to the
/// call the trainer makes for that op on a CPU rank (runtime/ops/Ops.h over
/// the reference kernels of stdlib/kernels), on random host data of that
/// shape, and times it with the steady clock (median of N after warm-up, in
/// three fresh sets of buffers, the median of those).
/// Its table makes the performance model predict the CPU trainer, which is
/// how the time model is checked without a GPU (bench/time/).
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

/// The median wall time of `run` over `repeats` calls after `warmup` calls.
double medianHostSeconds(int warmup, int repeats, const std::function<void()> &run);

/// Times `e` with the CPU ops, weights and activations of type `dtype`
/// (statistics, the loss and weight gradients fp32, as a plan with the
/// default grad_dtype keeps them); never throws.
OpTime timeOpOnCpu(const ShapeEntry &e, int warmup, int repeats,
                   mist::rt::DType dtype = mist::rt::DType::F32);

} // namespace mist::profiler
