//===- WeightMoves.h - A region's weights brought in for its compute ------===//
/// \file
/// The schedule's weight steps (docs/schedule.md): `fetchWeights` brings the
/// offloaded tail of a region's weights (or of its ZeRO-3 slices) in over
/// h2d, `gatherWeights` all-gathers its ZeRO-3 slices over g2g, each beside
/// the compute issued before it; `prefetch` does what the region needs of
/// both (pre and post, which have no steps of their own). `acquire` makes
/// the region's compute wait for them and for its last optimizer update (or
/// brings them now if no step did), and `release` drops them after it. So at
/// most two regions' weights are present: the double buffer the performance
/// model counts. Weights that do not move stay where they are.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/trainer/ParameterTable.h"

namespace mist::rt {

class WeightMoves : ParameterView {
public:
  explicit WeightMoves(ParameterTable &table);

  void fetchWeights(StageRegion region);
  void gatherWeights(StageRegion region);
  void prefetch(StageRegion region);
  void acquire(StageRegion region);
  void release(StageRegion region);

private:
  /// How weights come in: the offloaded tail over h2d, the ZeRO-3 slices
  /// all-gathered over g2g.
  enum class WeightMove { Fetch, Gather };
  void bring(StageRegion region, WeightMove move); ///< now, on the current stream
  void startMove(StageRegion region, WeightMove move);
  std::vector<Event> prefetched; ///< per region (slot): its weights brought in
};

} // namespace mist::rt
