//===- Pareto.cpp - Frontier of (steady time, extra time / G) -------------===//
#include "passes/tuner/Pareto.h"

#include <algorithm>
#include <cmath>

using namespace mist;

std::vector<ParetoPoint> mist::paretoFrontier(std::vector<ParetoPoint> points, size_t limit) {
  std::sort(points.begin(), points.end(), [](const ParetoPoint &a, const ParetoPoint &b) {
    if (a.t != b.t)
      return a.t < b.t;
    if (a.dPerG != b.dPerG)
      return a.dPerG < b.dPerG;
    return a.index < b.index;
  });
  std::vector<ParetoPoint> front;
  double bestD = INFINITY;
  for (const ParetoPoint &p : points)
    if (p.dPerG < bestD) {
      front.push_back(p);
      bestD = p.dPerG;
    }
  if (limit == 0 || front.size() <= limit)
    return front;
  std::vector<bool> keep(front.size(), false);
  keep.front() = keep.back() = true;
  size_t alphas = limit >= 2 ? limit - 2 : 0;
  for (size_t a = 1; a <= alphas; ++a) {
    double alpha = double(a) / double(alphas + 1);
    size_t best = 0;
    double bestCost = INFINITY;
    for (size_t i = 0; i < front.size(); ++i) {
      double cost = alpha * front[i].t + (1 - alpha) * front[i].dPerG;
      if (cost < bestCost) {
        bestCost = cost;
        best = i;
      }
    }
    keep[best] = true;
  }
  std::vector<ParetoPoint> sampled;
  for (size_t i = 0; i < front.size(); ++i)
    if (keep[i])
      sampled.push_back(front[i]);
  return sampled;
}
