//===- Median.cpp - The figure of repeated measurements -------------------===//
#include "tools/profiler/Median.h"

#include <algorithm>

namespace mist::profiler {

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

} // namespace mist::profiler
