//===- Limits.h - The largest inputs mistc accepts ------------------------===//
/// \file
/// Bounds on the numbers users give (in .mist files, on the command line, in
/// plan and cluster files), checked where they enter with a located error, so
/// that every size and product computed from them fits in 64 bits and every
/// search over them ends. README, "Limits", lists them.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>

namespace mist::limits {

/// Layers of a model (the repeat count) and so layer indices of a plan.
constexpr int64_t maxLayers = 1'000'000;
/// GPUs, nodes, GPUs per node, dp, tp, micro-batch, gradient accumulation,
/// global batch and sequence length: 2^24 each. The product of any three
/// fits in 64 bits' 2^63 only with a check, which the loaders do.
constexpr int64_t maxCount = int64_t(1) << 24;
/// Digits of a whole number a user writes (a size in a .mist file, a
/// symbol's value in textual IR): below 10^18, so sums and small multiples
/// of sizes stay inside int64 and GiNaC's fixnum range.
constexpr size_t maxIntegerDigits = 18;
/// Axes of a tensor: the .mist parser and the IR reader refuse more, so
/// every IR dump reads back.
constexpr size_t maxTensorAxes = 8;
/// Pipeline stages of a plan (each holds a layer at least, and a GPU).
constexpr int64_t maxStages = 4096;
/// Training steps (warmup_steps, the trainer's --steps and the like): an
/// int in train.cu and the trainer, and far beyond any real run.
constexpr int64_t maxSteps = 1'000'000'000;

/// Whether `v` survives the trip into the 32-bit float the trainer computes
/// its learning rates, epsilons and clipping in: 0, or a normal float
/// (a denormal or overflowing value would become 0 or inf there).
inline bool fitsFloat(double v) {
  const double a = v < 0 ? -v : v;
  return a == 0 || (a >= 1.1754943508222875e-38 && a <= 3.4028234663852886e+38);
}

} // namespace mist::limits
