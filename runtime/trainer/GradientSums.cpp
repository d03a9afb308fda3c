//===- GradientSums.cpp - The step's gradient sums and their reduction ------===//
#include "runtime/trainer/GradientSums.h"

#include "runtime/comm/MpiCommunicator.h"
#include "runtime/ops/Ops.h"
#include <algorithm>

namespace mist::rt {

GradientSums::GradientSums(ParameterTable &table)
    : ParameterView(table), folded(regionCount(), Event{}) {}

void GradientSums::beginStep() {
  for (size_t p = 0; p < state.size(); ++p)
    for (size_t l = 0; l < state[p].size(); ++l)
      // A group whose last update is still pending keeps its sums until
      // applyPendingStep has read them.
      if (!state[p][l].updateDue)
        zeroSums(p, l);
}

void GradientSums::zeroSums(size_t p, size_t l) {
  State &s = state[p][l];
  if (s.sumsInPlace) {
    DeviceTensor &sum = gradSum(p, l);
    device::fillZero(sum.data(), sum.bytes());
    return;
  }
  // A tied weight's gradients are summed over two stages whose slices
  // may differ: they stay whole until reduceGradients.
  s.grad.assignZeros(gradsSliced && !tied(p) ? s.chunk : s.local);
  s.gradHost.clear();
  offload.swapOut(s.grad, s.gradHost, spec.offloadGrads);
}

void GradientSums::clearGradBuffers() {
  for (size_t p = 0; p < state.size(); ++p)
    for (size_t l = 0; l < state[p].size(); ++l)
      for (int g : spec.params[p].grads) {
        if (state[p][l].sumsInPlace || foldedPerRegion(p))
          continue; // the step's sum itself, or allocated zeroed by its region
        DeviceTensor &buf = gradBuffer(g, int(l));
        device::fillZero(buf.data(), buf.bytes());
      }
}

void GradientSums::prepareGradBuffers(StageRegion region) {
  // The previous micro-batch's fold of these buffers is done before they
  // are made again.
  Event &lastFold = folded[slot(region)];
  if (lastFold.recorded())
    streams.wait(StreamKind::Compute, lastFold);
  for (auto [p, l] : paramsOf(region))
    if (foldedPerRegion(p))
      for (int g : spec.params[p].grads) {
        DeviceTensor &buf = gradBuffer(g, int(l));
        if (buf.empty()) // buffers of one parameter may share an array
          buf.assignZeros(size_t(spec.buffers[size_t(g)].elements));
      }
}

GradientSums::Copies GradientSums::foldedBy(StageRegion region) const {
  std::vector<std::pair<size_t, size_t>> out;
  for (auto [p, l] : paramsOf(region))
    // ZeRO-2 reduce-scatters a weight pre and post share once, after pre's
    // backward; an offloaded sum takes each region's part as it is made.
    if (foldedPerRegion(p) && (gradsSliced ? lastBackwardOf(spec.params[p]) == region.kind
                                           : uses(spec.params[p], region.kind)))
      out.push_back({p, l});
  return out;
}

// The fold of a region's gradients into the step's sums is the schedule's
// steps after its backward: ZeRO-2's reduce-scatter into the rank's slice
// (g2g), and for offloaded sums the fetch of their tails (h2d) and the
// write-back of the sums with this micro-batch's part added (d2h). Each
// waits for the backward that wrote the buffers and for the region's fold
// before; the next micro-batch's backward waits for the last
// (prepareGradBuffers), the step's reduceGradients fence for them all.
void GradientSums::runFold(StreamKind stream, const std::string &what, StageRegion region,
                           std::function<void(size_t, size_t)> work) {
  const std::vector<std::pair<size_t, size_t>> members = foldedBy(region);
  if (members.empty())
    return;
  Event &last = folded[slot(region)];
  streams.wait(stream, streams.record(StreamKind::Compute));
  if (last.recorded())
    streams.wait(stream, last);
  streams.run(stream, what + regionName(region), [members, work] {
    for (auto [p, l] : members)
      work(p, l);
  });
  last = streams.record(stream);
}

void GradientSums::freeGradBuffers(size_t p, size_t l) {
  for (int g : spec.params[p].grads)
    gradBuffer(g, int(l)).clear(); // allocated again by the next micro-batch's backward
}

void GradientSums::scatterRegionGradients(StageRegion region) {
  if (!gradsSliced)
    return;
  runFold(StreamKind::G2G, "reduce-scatter gradients ", region, [this](size_t p, size_t l) {
    State &s = state[p][l];
    s.incoming = microBatchGradient(p, l);
    freeGradBuffers(p, l);
    if (spec.offloadGrads > 0)
      return; // added by the write-back
    addToSum(p, l, s.incoming);
    s.incoming.clear();
  });
}

void GradientSums::fetchGradientSums(StageRegion region) {
  if (spec.offloadGrads <= 0)
    return;
  runFold(StreamKind::H2D, "swap in gradient sums ", region,
          [this](size_t p, size_t l) { offload.swapIn(state[p][l].grad, state[p][l].gradHost); });
}

void GradientSums::writeBackGradientSums(StageRegion region) {
  if (spec.offloadGrads <= 0)
    return;
  runFold(StreamKind::D2H, "swap out gradient sums ", region, [this](size_t p, size_t l) {
    State &s = state[p][l];
    offload.swapIn(s.grad, s.gradHost); // one micro-batch: no fetch step brought it
    if (gradsSliced) {
      addToSum(p, l, s.incoming);
      s.incoming.clear();
    } else {
      addToSum(p, l, microBatchGradient(p, l));
    }
    freeGradBuffers(p, l);
    offload.swapOut(s.grad, s.gradHost, spec.offloadGrads);
  });
}

void GradientSums::foldRegionGradients(StageRegion region) {
  scatterRegionGradients(region);
  fetchGradientSums(region);
  writeBackGradientSums(region);
}

DeviceTensor GradientSums::microBatchGradient(size_t p, size_t l) {
  State &s = state[p][l];
  // The micro-batch's gradient: the sum of the buffers contributing to the
  // parameter (a tied weight has one per region reading it).
  const bool scatter = gradsSliced && !tied(p);
  const std::vector<DeviceTensor *> sources = gradArrays(p, l);
  const DType type = gradType(p);
  DeviceTensor sum(type);
  if (!scatter && sources.size() == 1)
    return sum; // empty: addToSum reads the buffer as it is
  // One buffer that splits evenly over dp is scattered as it is; otherwise
  // the buffers are summed (zero-padded) first.
  const bool direct = scatter && sources.size() == 1 && sources[0]->size() == s.chunk * size_t(dp);
  if (!direct) {
    sum.assignZeros(scatter ? s.chunk * size_t(dp) : s.local);
    for (const DeviceTensor *src : sources)
      device::accumulate(sum.tensor(), src->tensor(), std::min(s.local, src->size()));
  }
  if (scatter) { // summed over dp into this rank's slice at once
    DeviceTensor part(type);
    part.assignZeros(s.chunk);
    groups.dp.reduceScatterSum(direct ? sources[0]->data() : sum.data(), part.data(), s.chunk,
                               type);
    sum = std::move(part);
  }
  return sum;
}

void GradientSums::addToSum(size_t p, size_t l, const DeviceTensor &gradient) {
  State &s = state[p][l];
  if (gradient.empty()) { // the parameter's one buffer
    const DeviceTensor &buffer = *gradArrays(p, l)[0];
    device::accumulate(s.grad.tensor(), buffer.tensor(), std::min(s.local, buffer.size()));
    return;
  }
  device::accumulate(s.grad.tensor(), gradient.tensor(), s.grad.size());
}

void GradientSums::foldInto(size_t p, size_t l) {
  State &s = state[p][l];
  const DeviceTensor gradient = microBatchGradient(p, l);
  offload.swapIn(s.grad, s.gradHost);
  addToSum(p, l, gradient);
  offload.swapOut(s.grad, s.gradHost, spec.offloadGrads);
}

void GradientSums::foldGradBuffers() {
  streams.runFenced(gradsSliced ? StreamKind::G2G : StreamKind::Compute,
                    gradsSliced ? "reduce-scatter gradients" : "accumulate gradients", [&] {
                      for (size_t p = 0; p < state.size(); ++p)
                        for (size_t l = 0; l < state[p].size(); ++l)
                          if (!state[p][l].sumsInPlace && !foldedPerRegion(p))
                            foldInto(p, l);
                    });
}

bool GradientSums::reducedPerRegion(size_t p, size_t copy) const {
  // Summed in place, or folded region by region into an offloaded sum: the
  // step's sum is complete after the region's last backward.
  return dp > 1 && !gradsSliced && !tied(p) && (state[p][copy].sumsInPlace || foldedPerRegion(p));
}

void GradientSums::reduceRegionGradients(StageRegion region) {
  std::vector<std::pair<size_t, size_t>> toReduce;
  for (auto [p, l] : paramsOf(region))
    if (reducedPerRegion(p, l) && lastBackwardOf(spec.params[p]) == region.kind) {
      toReduce.push_back({p, l});
      state[p][l].reducedEarly = true;
    }
  if (toReduce.empty())
    return;
  // After the backward that completed the sums (and the write-back of
  // offloaded ones); the step's reduceGradients fence, later on the same
  // stream, makes the norm and the optimizer wait.
  streams.wait(StreamKind::G2G, streams.record(StreamKind::Compute));
  const Event &lastFold = folded[slot(region)];
  if (lastFold.recorded())
    streams.wait(StreamKind::G2G, lastFold);
  // A layer whose gradients are one array (StageMemory) and all reduced
  // here: one all-reduce of the array, as the model prices a region's.
  if (DeviceTensor *all = wholeLayerGradients(region, toReduce)) {
    streams.run(StreamKind::G2G, "all-reduce gradients " + regionName(region),
                [this, all] { groups.dp.allReduceSum(all->data(), all->size(), all->dtype()); });
    return;
  }
  streams.run(StreamKind::G2G,
              (sliced ? "reduce-scatter gradients " : "all-reduce gradients ") + regionName(region),
              [this, toReduce] {
                for (auto [p, l] : toReduce) {
                  State &s = state[p][l];
                  const bool offloaded = spec.offloadGrads > 0;
                  if (offloaded) // whole for the reduction
                    offload.swapIn(s.grad, s.gradHost);
                  reduceOverDp(p, l);
                  if (offloaded)
                    offload.swapOut(s.grad, s.gradHost, spec.offloadGrads);
                }
              });
}

DeviceTensor *GradientSums::wholeLayerGradients(StageRegion region, const Copies &toReduce) {
  if (region.kind != RegionKind::Layer || sliced || spec.offloadGrads > 0)
    return nullptr;
  DeviceTensor &all = layers[size_t(region.layer)].allGradients;
  if (all.empty())
    return nullptr;
  const std::byte *begin = static_cast<const std::byte *>(all.data()), *end = begin + all.bytes();
  auto inside = [&](size_t p, size_t l) {
    const auto *at = static_cast<const std::byte *>(gradSum(p, l).data());
    return at >= begin && at < end;
  };
  // Every gradient of the array is reduced here, and nothing else.
  size_t held = 0;
  for (auto [p, l] : paramsOf(region))
    held += inside(p, l) ? 1 : 0;
  for (auto [p, l] : toReduce)
    if (!state[p][l].sumsInPlace || !inside(p, l))
      return nullptr;
  return held == toReduce.size() ? &all : nullptr;
}

void GradientSums::reduceOverDp(size_t p, size_t copy) {
  State &s = state[p][copy];
  DeviceTensor &sum = gradSum(p, copy);
  if (!sliced) {
    groups.dp.allReduceSum(sum.data(), sum.size(), sum.dtype());
    return;
  }
  DeviceTensor padded(sum.dtype()), part(sum.dtype());
  const void *whole = sum.data();
  if (sum.size() != s.chunk * size_t(dp)) { // the last slice is zero-padded
    padded.assignZeros(s.chunk * size_t(dp));
    device::copy(padded.data(), sum.data(), sum.bytes());
    whole = padded.data();
  }
  part.assignZeros(s.chunk);
  groups.dp.reduceScatterSum(whole, part.data(), s.chunk, sum.dtype());
  s.grad = std::move(part);
}

void GradientSums::reduceGradients() {
  // What the last backward reduced already (decided here, on the thread
  // that enqueued those reductions); a train.cu that skipped a region's
  // reduction still gets it here.
  std::vector<std::vector<char>> early(state.size());
  for (size_t p = 0; p < state.size(); ++p)
    for (State &s : state[p]) {
      early[p].push_back(s.reducedEarly);
      s.reducedEarly = false;
    }
  streams.runFenced(StreamKind::G2G, "reduce gradients over dp", [&] {
    for (size_t p = 0; p < state.size(); ++p)
      for (size_t l = 0; l < state[p].size(); ++l) {
        State &s = state[p][l];
        offload.swapIn(s.grad, s.gradHost);
        // Summed already over dp: ZeRO-2's per micro-batch, the rest in the
        // last backward.
        if (tied(p))
          sumTiedOverStages(p, s);
        else if (!gradsSliced && !early[p][l] && dp > 1)
          reduceOverDp(p, l);
        // A replicated parameter has the same layout on every tp rank, so
        // this dp rank's slice of it is the same elements on each.
        if (spec.params[p].tpPartialGrad && tp > 1) {
          DeviceTensor &sum = gradSum(p, l);
          groups.tp.allReduceSum(sum.data(), sum.size(), sum.dtype());
        }
      }
  });
}

// Where both end stages have the same tp, each tp rank's part is summed on
// the device over the ranks holding it. Otherwise the full tensor is summed
// over both stages' ranks: each tp rank adds its shard (a replicated tensor:
// tp rank 0 only), each dp rank its sum. A shard that is one block of the
// full tensor (split along the first axis in one group: GPT's vocab-parallel
// embedding) is placed and read back on the device; any other layout goes
// through the host's shard-to-full index map (one tensor per step, and only
// pipelines have one).
void GradientSums::sumTiedOverStages(size_t p, State &s) {
  DeviceTensor &sum = gradSum(p, size_t(&s - state[p].data()));
  const DType type = sum.dtype();
  if (groups.tiedShard) {
    // This part of the tensor, summed over the dp ranks of both stages that
    // hold it (a replicated weight: each tp rank's group sums its own copy).
    groups.tiedShard->allReduceSum(sum.data(), sum.size(), type);
    if (sliced)
      s.grad = slice(sum, s.chunk);
    return;
  }
  const ParamSpec &ps = spec.params[p];
  int64_t fullSize = 1;
  for (int64_t d : ps.shape)
    fullSize *= d;
  const bool sharded = ps.shardAxis >= 0 && tp > 1;
  if (!sharded || (ps.shardAxis == 0 && ps.groups.size() <= 1)) {
    // This rank's part is the block at `offset` of the full tensor.
    const size_t offset = sharded ? size_t(tpRank) * s.local : 0, bytes = s.local * bytesOf(type);
    DeviceTensor full(type), whole(type);
    full.assignZeros(size_t(fullSize));
    if (sharded || tpRank == 0)
      device::copy(full.at(offset).data, sum.data(), bytes);
    groups.tied->allReduceSum(full.data(), full.size(), type);
    whole.assignZeros(s.local);
    device::copy(whole.data(), full.at(offset).data, bytes);
    s.grad = sliced ? slice(whole, s.chunk) : std::move(whole);
    return;
  }
  std::vector<float> fullGrad(size_t(fullSize), 0.f);
  const kernels::InitialValuesArgs map = shardMap(ps, tpRank, tp);
  if (sharded || tpRank == 0) {
    const std::vector<float> mine = sum.download();
    for (size_t i = 0; i < s.local; ++i)
      fullGrad[size_t(kernels::math::fullIndex(map, int64_t(i)))] = mine[i];
  }
  DeviceTensor summed(type);
  summed.upload(fullGrad);
  groups.tied->allReduceSum(summed.data(), summed.size(), type);
  fullGrad = summed.download();
  std::vector<float> local(s.local);
  for (size_t i = 0; i < s.local; ++i)
    local[i] = fullGrad[size_t(kernels::math::fullIndex(map, int64_t(i)))];
  DeviceTensor whole(type);
  whole.upload(local);
  s.grad = sliced ? slice(whole, s.chunk) : std::move(whole);
}

double GradientSums::normSquaredShare() {
  normSum.upload({0.0});
  for (size_t p = 0; p < state.size(); ++p) {
    const ParamSpec &ps = spec.params[p];
    if (tied(p) && !groups.firstStage)
      continue; // the first stage counts the tied weight
    const bool sharded = ps.shardAxis >= 0 && tp > 1;
    if ((!sharded && tpRank != 0) || (!sliced && dpRank != 0))
      continue; // a replica: another rank counts it
    for (size_t l = 0; l < state[p].size(); ++l) {
      const DeviceTensor &sum = gradSum(p, l);
      device::accumulateSquares(normSum.data(), sum.tensor(), sum.size());
    }
  }
  return normSum.download()[0];
}

} // namespace mist::rt
