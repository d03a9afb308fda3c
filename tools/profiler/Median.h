//===- Median.h - The figure of repeated measurements ---------------------===//
#pragma once

#include <vector>

namespace mist::profiler {

/// The median of `v` (the mean of the middle two for an even count); 0
/// when empty. Every profiler figure is the median of its repetitions,
/// robust to a stray slow run.
double median(std::vector<double> v);

} // namespace mist::profiler
