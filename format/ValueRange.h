//===- ValueRange.h - The ranges a number in an input file must lie in ----===//
/// \file
/// One list of ranges, and their wording, for every reader of plan and
/// cluster files (format/ClusterReader, yaml/YamlReader).
//===----------------------------------------------------------------------===//
#pragma once

#include <optional>
#include <string_view>

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

/// A plain scalar's text as the readers take a number: digits, sign, point
/// and exponent only, the whole text (so "0x10", "inf" and "1e5 GB" are
/// not numbers); nullopt otherwise. The value may be inf (the caller says
/// "out of range").
std::optional<double> scalarReal(std::string_view text);
/// true/True/TRUE and false/False/FALSE; nullopt otherwise.
std::optional<bool> scalarBool(std::string_view text);

} // namespace mist
