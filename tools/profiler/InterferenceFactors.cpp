//===- InterferenceFactors.cpp - The interference table from unit timings -===//
#include "tools/profiler/InterferenceFactors.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace mist::profiler {

std::vector<unsigned> interferenceStreamSets() {
  std::vector<unsigned> masks;
  for (unsigned mask = 1; mask < 16; ++mask)
    if (std::popcount(mask) >= 2)
      masks.push_back(mask);
  std::stable_sort(masks.begin(), masks.end(),
                   [](unsigned a, unsigned b) { return std::popcount(a) < std::popcount(b); });
  return masks;
}

InterferenceEntry interferenceFactors(const UnitTimes (&units)[4], const double alone[4]) {
  double lo = 0, hi = INFINITY;
  for (const UnitTimes &u : units)
    if (!u.empty()) {
      lo = std::max(lo, u.front().first);
      hi = std::min(hi, u.back().second);
    }
  InterferenceEntry f;
  for (int s = 0; s < 4; ++s) {
    const UnitTimes &u = units[s];
    if (u.empty())
      continue;
    double sum = 0;
    int inside = 0;
    for (auto [a, b] : u)
      if (a >= lo && b <= hi) {
        sum += b - a;
        ++inside;
      }
    const double busy =
        inside ? sum / inside : (u.back().second - u.front().first) / double(u.size());
    const double factor = std::max(1.0, busy / alone[s]);
    f.streams.push_back(mist::Stream(s));
    f.factors.push_back(std::round(factor * 1000) / 1000);
  }
  return f;
}

} // namespace mist::profiler
