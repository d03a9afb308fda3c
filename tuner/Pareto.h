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

/// Builds a frontier one point at a time, without sorting all points: the
/// tuner inserts millions of points of which a few hundred survive. Points
/// are ordered by (t, d/G, index); a point is kept when no point before it
/// has a d/G as small, so exact ties keep the smaller index and the result
/// does not depend on insertion order.
class FrontierBuilder {
public:
  void clear() { front.clear(); }
  void insert(const ParetoPoint &p);
  /// Increasing t, strictly decreasing d/G.
  const std::vector<ParetoPoint> &frontier() const { return front; }

private:
  std::vector<ParetoPoint> front;
};

/// At most `limit` points of a frontier (0: all): both ends and the
/// minimisers of alpha*t + (1-alpha)*d/G.
std::vector<ParetoPoint> sampleFrontier(const std::vector<ParetoPoint> &front, size_t limit);

/// The frontier of `points`, sampled to `limit` points (0 keeps all),
/// by increasing t.
std::vector<ParetoPoint> paretoFrontier(const std::vector<ParetoPoint> &points, size_t limit);

} // namespace mist
