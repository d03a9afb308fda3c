//===- ValueRange.h - The ranges a number in an input file must lie in ----===//
/// \file
/// One list of ranges, and their wording, for every reader of plan and
/// cluster files (format/ClusterReader, yaml/YamlReader).
//===----------------------------------------------------------------------===//
#pragma once

namespace mist {

enum class Range {
  Any,
  NonNegative, ///< >= 0
  Positive,    ///< > 0
  /// [1e-6, 1e9]: a hardware figure (GB/s, TFLOP/s, GiB); a denormal or
  /// astronomic value is a typo that would make every time inf or 0.
  Figure,
  Fraction,   ///< (0, 1]
  Ratio,      ///< [0, 1]
  AtLeastOne, ///< >= 1
  Count,      ///< [1, limits::maxCount]: GPUs, nodes, dp, tp, batches
  LayerIndex, ///< [0, limits::maxLayers)
};

/// Whether a key must be present.
enum class Need { Required, Optional };

/// What `v` fails of `range` ("must be positive"), or null when it lies in it.
const char *rangeProblem(double v, Range range);

} // namespace mist
