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

} // namespace mist::limits
