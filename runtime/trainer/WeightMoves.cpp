//===- WeightMoves.cpp - A region's weights brought in for its compute ------===//
#include "runtime/trainer/WeightMoves.h"

#include <algorithm>

namespace mist::rt {

WeightMoves::WeightMoves(ParameterTable &table)
    : ParameterView(table), prefetched(regionCount(), Event{}) {}

// The two ways weights come in: the offloaded tail (of the weights, or of
// the ZeRO-3 slice) over h2d, and the ZeRO-3 slices all-gathered over g2g.
void WeightMoves::bring(StageRegion region, WeightMove move) {
  for (auto [p, l] : paramsOf(region)) {
    State &s = state[p][l];
    if (s.resident)
      continue;
    DeviceTensor &w = weights(p, int(l));
    if (move == WeightMove::Fetch) {
      if (weightsSliced)
        offload.swapIn(s.shard, s.shardHost);
      else {
        offload.swapIn(w, s.weightHost);
        s.resident = true;
      }
      continue;
    }
    offload.swapIn(s.shard, s.shardHost); // when no fetch brought it
    unsplit(w, s.shard, s.local);
    offload.swapOut(s.shard, s.shardHost, spec.offloadWeights);
    s.resident = true;
  }
}

// Issued before the compute of the region ahead of this one is enqueued, so
// the copy or gather runs beside it; the stream waits for the compute work
// enqueued so far (which released these weights last), for the group's last
// update and for the fetch before a gather, and acquire makes compute wait
// for the event it records.
void WeightMoves::startMove(StageRegion region, WeightMove move) {
  const size_t g = slot(region);
  const StreamKind mover = move == WeightMove::Fetch ? StreamKind::H2D : StreamKind::G2G;
  streams.wait(mover, streams.record(StreamKind::Compute));
  if (g < updated.size() && updated[g].recorded())
    streams.wait(mover, updated[g]);
  if (prefetched[g].recorded())
    streams.wait(mover, prefetched[g]);
  const std::string name =
      (move == WeightMove::Fetch ? "swap in weights " : "all-gather weights ") + regionName(region);
  streams.run(mover, name, [this, region, move] { bring(region, move); });
  prefetched[g] = streams.record(mover);
}

void WeightMoves::fetchWeights(StageRegion region) {
  if (spec.offloadWeights > 0)
    startMove(region, WeightMove::Fetch);
}

void WeightMoves::gatherWeights(StageRegion region) {
  if (weightsSliced)
    startMove(region, WeightMove::Gather);
}

void WeightMoves::prefetch(StageRegion region) {
  fetchWeights(region);
  gatherWeights(region);
}

void WeightMoves::acquire(StageRegion region) {
  // The region's weights as the last optimizer step left them.
  const size_t g = slot(region);
  if (g < updated.size() && updated[g].recorded())
    streams.wait(StreamKind::Compute, updated[g]);
  if (!movesWeights())
    return;                       // weights stay where they are
  if (prefetched[g].recorded()) { // brought in beside the previous region
    streams.wait(StreamKind::Compute, prefetched[g]);
    prefetched[g] = Event{};
  }
  const std::vector<std::pair<size_t, size_t>> used = paramsOf(region);
  if (std::all_of(used.begin(), used.end(),
                  [&](auto pl) { return state[pl.first][pl.second].resident; }))
    return;
  // No step brought them (or not all the way): now, before the compute.
  if (spec.offloadWeights > 0)
    streams.runFenced(StreamKind::H2D, "swap in weights " + regionName(region),
                      [&] { bring(region, WeightMove::Fetch); });
  if (weightsSliced)
    streams.runFenced(StreamKind::G2G, "all-gather weights " + regionName(region),
                      [&] { bring(region, WeightMove::Gather); });
}

void WeightMoves::release(StageRegion region) {
  if (!movesWeights())
    return; // weights stay where they are
  auto drop = [&] {
    for (auto [p, l] : paramsOf(region)) {
      State &s = state[p][l];
      if (!s.resident)
        continue;
      DeviceTensor &w = weights(p, int(l));
      if (weightsSliced)
        w.clear(); // the slice is the only copy between uses
      else
        offload.swapOut(w, s.weightHost, spec.offloadWeights);
      s.resident = false;
    }
  };
  if (weightsSliced)
    drop(); // nothing moves: the gathered copy is freed
  else
    streams.runFenced(StreamKind::D2H, "swap out weights " + regionName(region), drop);
}

} // namespace mist::rt
