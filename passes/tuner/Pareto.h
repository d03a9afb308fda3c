//===- Pareto.h - Frontier of (steady time, extra time / G) ---------------===//
/// \file
/// For one stage context the tuner keeps only strategies that no other beats
/// in both t and d/G. When the frontier has more than K points, K are kept
/// by minimising alpha*t + (1-alpha)*d/G for alphas evenly spaced in (0, 1)
/// (the seed's sampling), plus the two ends of the frontier.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <vector>

namespace mist {

struct ParetoPoint {
  double t, dPerG;
  size_t index; ///< position in the caller's candidate list
};

/// `limit` = 0 keeps the whole frontier. Points are returned by increasing t.
/// Ties are broken by index, so the result is deterministic.
std::vector<ParetoPoint> paretoFrontier(std::vector<ParetoPoint> points, size_t limit);

} // namespace mist
