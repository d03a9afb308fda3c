//===- Pareto.cpp - Frontier of (steady time, extra time / G) -------------===//
#include "tuner/Pareto.h"

#include <algorithm>
#include <cmath>

using namespace mist;

namespace {
bool before(const ParetoPoint &a, const ParetoPoint &b) {
  if (a.t != b.t)
    return a.t < b.t;
  if (a.dPerG != b.dPerG)
    return a.dPerG < b.dPerG;
  return a.index < b.index;
}
} // namespace

void FrontierBuilder::insert(const ParetoPoint &p) {
  auto it = std::lower_bound(front.begin(), front.end(), p, before);
  // The kept point just before p has the smallest d/G of all points before p.
  if (it != front.begin() && std::prev(it)->dPerG <= p.dPerG)
    return;
  // p now comes before every point it beats; those follow it contiguously.
  auto beaten = it;
  while (beaten != front.end() && beaten->dPerG >= p.dPerG)
    ++beaten;
  it = front.erase(it, beaten);
  front.insert(it, p);
}

std::vector<ParetoPoint> mist::sampleFrontier(const std::vector<ParetoPoint> &front, size_t limit) {
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

std::vector<ParetoPoint> mist::paretoFrontier(const std::vector<ParetoPoint> &points,
                                              size_t limit) {
  FrontierBuilder b;
  for (const ParetoPoint &p : points)
    b.insert(p);
  return sampleFrontier(b.frontier(), limit);
}
