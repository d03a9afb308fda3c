//===- ParameterStore.cpp - One stage's parameters and optimizer state ----===//
#include "runtime/trainer/ParameterStore.h"

#include "runtime/comm/MpiCommunicator.h"
#include "runtime/ops/Ops.h"
#include <algorithm>
#include <map>

namespace mist::rt {

ParameterStore::ParameterStore(const StageSpec &stage, Frame &global, std::vector<Frame> &layers,
                               StageGroups groups, OffloadEngine &offload, Streams &streams)
    : spec(stage), global(global), layers(layers), groups(groups), offload(offload),
      streams(streams), tpRank(groups.tp.rank()), dpRank(groups.dp.rank()), tp(groups.tp.size()),
      dp(groups.dp.size()) {
  prefetched.assign(size_t(spec.layers) + 2, Event{});
  folded.assign(size_t(spec.layers) + 2, Event{});
  sliced = spec.zeroOptimizer && dp > 1;
  gradsSliced = sliced && spec.zeroGrads;
  weightsSliced = gradsSliced && spec.zeroWeights;
  state.resize(spec.params.size());
  for (size_t p = 0; p < spec.params.size(); ++p) {
    const ParamSpec &ps = spec.params[p];
    const int n = spec.buffers[ps.buffer].layer ? spec.layers : 1;
    state[p].resize(size_t(n));
    for (State &s : state[p]) {
      s.local = size_t(spec.buffers[ps.buffer].elements);
      s.chunk = sliced ? (s.local + size_t(dp) - 1) / size_t(dp) : s.local;
      // fp32 weights that stay whole on this rank are their own masters
      // (only the moments are then offloaded with the optimizer state).
      s.weightsInPlace = !sliced && spec.offloadWeights <= 0;
      s.masterIsWeights = s.weightsInPlace && weightType(p) == DType::F32;
      s.grad.setDType(gradType(p));
      s.shard.setDType(weightType(p));
      // Gradients that stay whole until the step (no ZeRO-2) and have one
      // buffer are summed over the micro-batches in that buffer; ZeRO-1 then
      // reduce-scatters it into the rank's slice (reduceGradients).
      s.sumsInPlace = !gradsSliced && gradArrays(p, size_t(&s - state[p].data())).size() == 1 &&
                      spec.offloadGrads <= 0;
    }
  }
  // ZeRO-2 gradient buffers exist only around the backward writing them.
  for (size_t p = 0; p < state.size(); ++p)
    if (foldedPerRegion(p))
      for (size_t l = 0; l < state[p].size(); ++l)
        for (int g : spec.params[p].grads)
          gradBuffer(g, int(l)).clear();
}

DeviceTensor &ParameterStore::weights(size_t p, int layer) {
  const int b = spec.params[p].buffer;
  return spec.buffers[b].layer ? layers[size_t(layer)].vec(b) : global.vec(b);
}

DeviceTensor &ParameterStore::gradBuffer(int buffer, int layer) {
  return spec.buffers[buffer].layer ? layers[size_t(layer)].vec(buffer) : global.vec(buffer);
}

DeviceTensor &ParameterStore::gradSum(size_t p, size_t copy) {
  State &s = state[p][copy];
  // Summed in place: the buffer, until ZeRO-1 reduce-scatters it into s.grad.
  return s.sumsInPlace && s.grad.empty() ? gradBuffer(spec.params[p].grads[0], int(copy)) : s.grad;
}

std::vector<DeviceTensor *> ParameterStore::gradArrays(size_t p, size_t copy) {
  std::vector<DeviceTensor *> arrays;
  for (int g : spec.params[p].grads) {
    DeviceTensor *a = &gradBuffer(g, int(copy));
    if (std::find(arrays.begin(), arrays.end(), a) == arrays.end())
      arrays.push_back(a); // buffers sharing one array count once
  }
  return arrays;
}

DeviceTensor &ParameterStore::masterOf(size_t p, size_t copy) {
  State &s = state[p][copy];
  return s.masterIsWeights ? weights(p, int(copy)) : s.master;
}

bool ParameterStore::uses(const ParamSpec &ps, RegionKind region) const {
  return std::find(ps.regions.begin(), ps.regions.end(), region) != ps.regions.end();
}

// This dp rank's flat slice of a tp-local tensor (the last one zero-padded).
DeviceTensor ParameterStore::slice(const DeviceTensor &local, size_t chunk) const {
  DeviceTensor out(local.dtype());
  out.assignZeros(chunk);
  const size_t begin = size_t(dpRank) * chunk;
  if (begin < local.size())
    device::copy(out.data(), local.at(begin).data,
                 std::min(chunk, local.size() - begin) * bytesOf(local.dtype()));
  return out;
}

// This tp rank's whole tensor from the dp ranks' slices.
void ParameterStore::unsplit(DeviceTensor &into, const DeviceTensor &part, size_t n) {
  DeviceTensor all(part.dtype());
  all.assignZeros(part.size() * size_t(dp));
  groups.dp.allGather(part.data(), all.data(), part.size(), part.dtype());
  all.resize(n);
  into = std::move(all);
}

// A tensor of this tp rank's shape as the full tensor.
std::vector<float> ParameterStore::gatherOverTp(size_t p, const DeviceTensor &local) {
  const ParamSpec &ps = spec.params[p];
  if (ps.shardAxis < 0 || tp == 1)
    return local.download();
  DeviceTensor gathered(local.dtype());
  gathered.assignZeros(local.size() * size_t(tp));
  groups.tp.allGather(local.data(), gathered.data(), local.size(), local.dtype());
  const std::vector<float> all = gathered.download();
  std::vector<float> fullValues(all.size());
  for (int r = 0; r < tp; ++r) {
    const kernels::InitialValuesArgs map = shardMap(ps, r, tp);
    for (size_t i = 0; i < local.size(); ++i)
      fullValues[size_t(kernels::math::fullIndex(map, int64_t(i)))] =
          all[size_t(r) * local.size() + i];
  }
  return fullValues;
}

void ParameterStore::initialize(uint64_t seed, int hostThreads, bool draw) {
  for (size_t p = 0; p < state.size(); ++p)
    for (size_t l = 0; l < state[p].size(); ++l) {
      const ParamSpec &ps = spec.params[p];
      State &s = state[p][l];
      const int layer = spec.buffers[ps.buffer].layer ? spec.firstLayer + int(l) : 0;
      // Drawn where they live (on a GPU by a kernel). fp32 weights that are
      // the masters take the values directly; otherwise fp32 masters are
      // drawn and the weights rounded from them. A resumed run loads every
      // tensor from its checkpoint after: zeros until then.
      DeviceTensor &w = weights(p, int(l)); // may be a view of an arena: written into
      w.allocateUninitialized(s.local);
      const bool direct = s.masterIsWeights && w.dtype() == DType::F32;
      DeviceTensor values(DType::F32);
      float *into = direct ? static_cast<float *>(w.data()) : nullptr;
      if (!direct) {
        values.allocateUninitialized(s.local);
        into = static_cast<float *>(values.data());
      }
      if (draw)
        ops::drawInitialValues(initialValuesArgs(ps, tpRank, tp, layer, seed, into, s.local),
                               hostThreads);
      else
        device::fillZero(into, s.local * sizeof(float));
      if (!direct) {
        ops::copy(w.tensor(), values.tensor(), ops::Index(s.local)); // rounded to its type
        if (!s.masterIsWeights)
          s.master = sliced ? slice(values, s.chunk) : std::move(values);
      }
      s.m.assignZeros(s.chunk);
      s.v.assignZeros(s.chunk);
      s.resident = true;
      // The offloaded tail leaves at once, tensor by tensor, so the
      // optimizer state is never all on the device (the model counts only
      // the part kept there).
      swapOutOptimizer(s);
    }
}

void ParameterStore::settle() {
  for (size_t p = 0; p < state.size(); ++p)
    for (size_t l = 0; l < state[p].size(); ++l) {
      State &s = state[p][l];
      DeviceTensor &w = weights(p, int(l));
      if (weightsSliced) {
        s.shard = slice(w, s.chunk);
        offload.swapOut(s.shard, s.shardHost, spec.offloadWeights);
        w.clear();
        s.resident = false;
      } else if (spec.offloadWeights > 0) {
        offload.swapOut(w, s.weightHost, spec.offloadWeights);
        s.resident = false;
      }
    }
  // The optimizer's staging for offloaded state, sized for the largest
  // group and kept: allocated now, so the first step holds what every later
  // one does (the memory the model counts) and a plan that cannot hold it
  // stops here.
  std::map<int, size_t> stagedPerGroup;
  for (size_t p = 0; p < state.size(); ++p)
    for (size_t l = 0; l < state[p].size(); ++l)
      stagedPerGroup[groupOf(p, l)] += state[p][l].mHost.size() / sizeof(float);
  size_t most = 0;
  for (auto [group, elements] : stagedPerGroup)
    most = std::max(most, elements);
  if (most > 0) {
    stagedM.assignZeros(most);
    stagedV.assignZeros(most);
    if (!state.empty() && !state[0].empty() && !state[0][0].masterIsWeights)
      stagedMaster.assignZeros(most);
  }
}

void ParameterStore::swapOutOptimizer(State &s) {
  offload.swapOut(s.master, s.masterHost, spec.offloadOptimizer);
  offload.swapOut(s.m, s.mHost, spec.offloadOptimizer);
  offload.swapOut(s.v, s.vHost, spec.offloadOptimizer);
}

void ParameterStore::swapInOptimizer(State &s) {
  offload.swapIn(s.master, s.masterHost);
  offload.swapIn(s.m, s.mHost);
  offload.swapIn(s.v, s.vHost);
}

std::vector<std::pair<size_t, size_t>> ParameterStore::paramsOf(RegionKind region,
                                                                int layer) const {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t p = 0; p < state.size(); ++p)
    if (uses(spec.params[p], region))
      out.push_back({p, spec.buffers[spec.params[p].buffer].layer ? size_t(layer) : 0});
  return out;
}

std::string ParameterStore::regionName(RegionKind region, int layer) const {
  return region == RegionKind::Layer ? "layer " + std::to_string(spec.firstLayer + layer)
         : region == RegionKind::Pre ? std::string("pre")
                                     : std::string("post");
}

int ParameterStore::groupOfRegion(RegionKind region, int layer) const {
  return region == RegionKind::Layer ? layer : region == RegionKind::Pre ? -1 : spec.layers;
}

bool ParameterStore::movesWeights() const { return weightsSliced || spec.offloadWeights > 0; }

// The two ways weights come in: the offloaded tail (of the weights, or of
// the ZeRO-3 slice) over h2d, and the ZeRO-3 slices all-gathered over g2g.
void ParameterStore::bring(RegionKind region, int layer, WeightMove move) {
  for (auto [p, l] : paramsOf(region, layer)) {
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
void ParameterStore::startMove(RegionKind region, int layer, WeightMove move) {
  const size_t g = size_t(groupOfRegion(region, layer) + 1);
  const StreamKind mover = move == WeightMove::Fetch ? StreamKind::H2D : StreamKind::G2G;
  streams.wait(mover, streams.record(StreamKind::Compute));
  if (g < updated.size() && updated[g].recorded())
    streams.wait(mover, updated[g]);
  if (prefetched[g].recorded())
    streams.wait(mover, prefetched[g]);
  const std::string name =
      (move == WeightMove::Fetch ? "swap in weights " : "all-gather weights ") +
      regionName(region, layer);
  streams.run(mover, name, [this, region, layer, move] { bring(region, layer, move); });
  prefetched[g] = streams.record(mover);
}

void ParameterStore::fetchWeights(RegionKind region, int layer) {
  if (spec.offloadWeights > 0)
    startMove(region, layer, WeightMove::Fetch);
}

void ParameterStore::gatherWeights(RegionKind region, int layer) {
  if (weightsSliced)
    startMove(region, layer, WeightMove::Gather);
}

void ParameterStore::prefetch(RegionKind region, int layer) {
  fetchWeights(region, layer);
  gatherWeights(region, layer);
}

void ParameterStore::acquire(RegionKind region, int layer) {
  // The region's weights as the last optimizer step left them.
  const size_t g = size_t(groupOfRegion(region, layer) + 1);
  if (g < updated.size() && updated[g].recorded())
    streams.wait(StreamKind::Compute, updated[g]);
  if (!movesWeights())
    return;                       // weights stay where they are
  if (prefetched[g].recorded()) { // brought in beside the previous region
    streams.wait(StreamKind::Compute, prefetched[g]);
    prefetched[g] = Event{};
  }
  const std::vector<std::pair<size_t, size_t>> used = paramsOf(region, layer);
  if (std::all_of(used.begin(), used.end(),
                  [&](auto pl) { return state[pl.first][pl.second].resident; }))
    return;
  // No step brought them (or not all the way): now, before the compute.
  if (spec.offloadWeights > 0)
    streams.runFenced(StreamKind::H2D, "swap in weights " + regionName(region, layer),
                      [&] { bring(region, layer, WeightMove::Fetch); });
  if (weightsSliced)
    streams.runFenced(StreamKind::G2G, "all-gather weights " + regionName(region, layer),
                      [&] { bring(region, layer, WeightMove::Gather); });
}

void ParameterStore::release(RegionKind region, int layer) {
  if (!movesWeights())
    return; // weights stay where they are
  auto drop = [&] {
    for (auto [p, l] : paramsOf(region, layer)) {
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
    streams.runFenced(StreamKind::D2H, "swap out weights " + regionName(region, layer), drop);
}

void ParameterStore::beginStep() {
  for (size_t p = 0; p < state.size(); ++p)
    for (size_t l = 0; l < state[p].size(); ++l)
      // A group whose last update is still pending keeps its sums until
      // applyPendingStep has read them.
      if (!state[p][l].updateDue)
        zeroSums(p, l);
}

void ParameterStore::zeroSums(size_t p, size_t l) {
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

void ParameterStore::clearGradBuffers() {
  for (size_t p = 0; p < state.size(); ++p)
    for (size_t l = 0; l < state[p].size(); ++l)
      for (int g : spec.params[p].grads) {
        if (state[p][l].sumsInPlace || foldedPerRegion(p))
          continue; // the step's sum itself, or allocated zeroed by its region
        DeviceTensor &buf = gradBuffer(g, int(l));
        device::fillZero(buf.data(), buf.bytes());
      }
}

// ZeRO-2 folds each region's gradients into the rank's slice at once; offloaded
// gradients are folded into the step's sum (mostly on the host) the same way,
// so neither keeps every layer's gradient buffer for the whole backward (the
// memory model counts two layers' buffers beside the resident sum).
RegionKind ParameterStore::lastBackwardOf(const ParamSpec &ps) const {
  return uses(ps, RegionKind::Pre)     ? RegionKind::Pre
         : uses(ps, RegionKind::Layer) ? RegionKind::Layer
                                       : RegionKind::Post;
}

bool ParameterStore::foldedPerRegion(size_t p) const {
  return gradsSliced ? !tied(p) : spec.offloadGrads > 0;
}

void ParameterStore::prepareGradBuffers(RegionKind region, int layer) {
  // The previous micro-batch's fold of these buffers is done before they
  // are made again.
  Event &lastFold = folded[size_t(groupOfRegion(region, layer) + 1)];
  if (lastFold.recorded())
    streams.wait(StreamKind::Compute, lastFold);
  for (auto [p, l] : paramsOf(region, layer))
    if (foldedPerRegion(p))
      for (int g : spec.params[p].grads) {
        DeviceTensor &buf = gradBuffer(g, int(l));
        if (buf.empty()) // buffers of one parameter may share an array
          buf.assignZeros(size_t(spec.buffers[size_t(g)].elements));
      }
}

std::vector<std::pair<size_t, size_t>> ParameterStore::foldedBy(RegionKind region,
                                                                int layer) const {
  std::vector<std::pair<size_t, size_t>> out;
  for (auto [p, l] : paramsOf(region, layer))
    // ZeRO-2 reduce-scatters a weight pre and post share once, after pre's
    // backward; an offloaded sum takes each region's part as it is made.
    if (foldedPerRegion(p) &&
        (gradsSliced ? lastBackwardOf(spec.params[p]) == region : uses(spec.params[p], region)))
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
void ParameterStore::runFold(StreamKind stream, const std::string &what, RegionKind region,
                             int layer, std::function<void(size_t, size_t)> work) {
  const std::vector<std::pair<size_t, size_t>> members = foldedBy(region, layer);
  if (members.empty())
    return;
  Event &last = folded[size_t(groupOfRegion(region, layer) + 1)];
  streams.wait(stream, streams.record(StreamKind::Compute));
  if (last.recorded())
    streams.wait(stream, last);
  streams.run(stream, what + regionName(region, layer), [members, work] {
    for (auto [p, l] : members)
      work(p, l);
  });
  last = streams.record(stream);
}

void ParameterStore::freeGradBuffers(size_t p, size_t l) {
  for (int g : spec.params[p].grads)
    gradBuffer(g, int(l)).clear(); // allocated again by the next micro-batch's backward
}

void ParameterStore::scatterRegionGradients(RegionKind region, int layer) {
  if (!gradsSliced)
    return;
  runFold(StreamKind::G2G, "reduce-scatter gradients ", region, layer, [this](size_t p, size_t l) {
    State &s = state[p][l];
    s.incoming = microBatchGradient(p, l);
    freeGradBuffers(p, l);
    if (spec.offloadGrads > 0)
      return; // added by the write-back
    addToSum(p, l, s.incoming);
    s.incoming.clear();
  });
}

void ParameterStore::fetchGradientSums(RegionKind region, int layer) {
  if (spec.offloadGrads <= 0)
    return;
  runFold(StreamKind::H2D, "swap in gradient sums ", region, layer,
          [this](size_t p, size_t l) { offload.swapIn(state[p][l].grad, state[p][l].gradHost); });
}

void ParameterStore::writeBackGradientSums(RegionKind region, int layer) {
  if (spec.offloadGrads <= 0)
    return;
  runFold(StreamKind::D2H, "swap out gradient sums ", region, layer, [this](size_t p, size_t l) {
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

void ParameterStore::foldRegionGradients(RegionKind region, int layer) {
  scatterRegionGradients(region, layer);
  fetchGradientSums(region, layer);
  writeBackGradientSums(region, layer);
}

DeviceTensor ParameterStore::microBatchGradient(size_t p, size_t l) {
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

void ParameterStore::addToSum(size_t p, size_t l, const DeviceTensor &gradient) {
  State &s = state[p][l];
  if (gradient.empty()) { // the parameter's one buffer
    const DeviceTensor &buffer = *gradArrays(p, l)[0];
    device::accumulate(s.grad.tensor(), buffer.tensor(), std::min(s.local, buffer.size()));
    return;
  }
  device::accumulate(s.grad.tensor(), gradient.tensor(), s.grad.size());
}

void ParameterStore::foldInto(size_t p, size_t l) {
  State &s = state[p][l];
  const DeviceTensor gradient = microBatchGradient(p, l);
  offload.swapIn(s.grad, s.gradHost);
  addToSum(p, l, gradient);
  offload.swapOut(s.grad, s.gradHost, spec.offloadGrads);
}

void ParameterStore::foldGradBuffers() {
  streams.runFenced(gradsSliced ? StreamKind::G2G : StreamKind::Compute,
                    gradsSliced ? "reduce-scatter gradients" : "accumulate gradients", [&] {
                      for (size_t p = 0; p < state.size(); ++p)
                        for (size_t l = 0; l < state[p].size(); ++l)
                          if (!state[p][l].sumsInPlace && !foldedPerRegion(p))
                            foldInto(p, l);
                    });
}

bool ParameterStore::reducedPerRegion(size_t p, size_t copy) const {
  // Summed in place, or folded region by region into an offloaded sum: the
  // step's sum is complete after the region's last backward.
  return dp > 1 && !gradsSliced && !tied(p) && (state[p][copy].sumsInPlace || foldedPerRegion(p));
}

void ParameterStore::reduceRegionGradients(RegionKind region, int layer) {
  std::vector<std::pair<size_t, size_t>> toReduce;
  for (auto [p, l] : paramsOf(region, layer))
    if (reducedPerRegion(p, l) && lastBackwardOf(spec.params[p]) == region) {
      toReduce.push_back({p, l});
      state[p][l].reducedEarly = true;
    }
  if (toReduce.empty())
    return;
  // After the backward that completed the sums (and the write-back of
  // offloaded ones); the step's reduceGradients fence, later on the same
  // stream, makes the norm and the optimizer wait.
  streams.wait(StreamKind::G2G, streams.record(StreamKind::Compute));
  const Event &lastFold = folded[size_t(groupOfRegion(region, layer) + 1)];
  if (lastFold.recorded())
    streams.wait(StreamKind::G2G, lastFold);
  streams.run(StreamKind::G2G,
              (sliced ? "reduce-scatter gradients " : "all-reduce gradients ") +
                  regionName(region, layer),
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

void ParameterStore::reduceOverDp(size_t p, size_t copy) {
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

void ParameterStore::reduceGradients() {
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
        if (tied(p))
          sumTiedOverStages(p, s);
        else if (gradsSliced || early[p][l])
          continue; // summed already: ZeRO-2 per micro-batch, the rest in the last backward
        else if (dp > 1)
          reduceOverDp(p, l);
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
void ParameterStore::sumTiedOverStages(size_t p, State &s) {
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

double ParameterStore::normSquaredShare() {
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

std::vector<std::pair<size_t, size_t>> ParameterStore::membersOf(int group) const {
  std::vector<std::pair<size_t, size_t>> members;
  for (size_t p = 0; p < state.size(); ++p)
    for (size_t l = 0; l < state[p].size(); ++l)
      if (groupOf(p, l) == group)
        members.push_back({p, l});
  return members;
}

int ParameterStore::groupOf(size_t p, size_t copy) const {
  const ParamSpec &ps = spec.params[p];
  if (spec.buffers[ps.buffer].layer)
    return int(copy);
  return uses(ps, RegionKind::Pre) ? -1 : spec.layers;
}

void ParameterStore::deferStep(const AdamStep &adam) {
  if (pendingStep)
    abortJob("an optimizer step was deferred before the last one ran");
  pendingStep = adam;
  updated.assign(size_t(spec.layers) + 2, Event{});
  groupPending.assign(size_t(spec.layers) + 2, 0);
  for (size_t p = 0; p < state.size(); ++p)
    for (size_t l = 0; l < state[p].size(); ++l) {
      state[p][l].updateDue = true;
      groupPending[size_t(groupOf(p, l) + 1)] = 1;
    }
}

// A group's update is the schedule's four steps (docs/schedule.md): the
// offloaded optimizer state comes in (h2d), AdamW runs (compute), the new
// weights are all-gathered from the ZeRO-1/2 slices (g2g) and the offloaded
// state and weights go back out (d2h). Each runs when the emitted schedule
// calls it; what one skipped runs before the group's weights are used
// (completeUpdate), and a group without a pending update has nothing to do.
ParameterStore::GroupUpdate *ParameterStore::updateOf(int group) {
  auto under = updates.find(group);
  if (under != updates.end())
    return under->second.get();
  const size_t g = size_t(group + 1);
  if (!pendingStep || g >= groupPending.size() || !groupPending[g])
    return nullptr;
  groupPending[g] = 0;
  auto u = std::make_shared<GroupUpdate>();
  u->group = group;
  u->members = membersOf(group);
  u->stagedAt.assign(u->members.size(), 0);
  for (size_t i = 0; i < u->members.size(); ++i) {
    u->stagedAt[i] = u->staged;
    u->staged += state[u->members[i].first][u->members[i].second].mHost.size() / sizeof(float);
  }
  u->inPlace =
      u->members.empty() || state[u->members[0].first][u->members[0].second].weightsInPlace;
  for (auto [p, l] : u->members)
    u->next.emplace_back(weightType(p));
  u->resident.assign(u->members.size(), 1);
  updates[group] = u;
  return u.get();
}

std::string ParameterStore::groupName(int group) const {
  return regionName(regionOfGroup(group), group);
}

RegionKind ParameterStore::regionOfGroup(int group) const {
  return group < 0 ? RegionKind::Pre : group == spec.layers ? RegionKind::Post : RegionKind::Layer;
}

void ParameterStore::fetchOptimizerState(int group) {
  GroupUpdate *u = updateOf(group);
  if (!u || u->fetched)
    return;
  u->fetched = true;
  if (u->staged == 0)
    return;
  if (stagedM.size() < u->staged) {
    stagedM.assignZeros(u->staged);
    stagedV.assignZeros(u->staged);
    if (!state[u->members[0].first][u->members[0].second].masterIsWeights)
      stagedMaster.assignZeros(u->staged);
  }
  // The offloaded tails of the group's masters and moments come into one
  // staging buffer each (members one after the other), are stepped there,
  // and go back; the device parts are stepped in place.
  streams.runFenced(StreamKind::H2D, "swap in optimizer state " + groupName(group), [&] {
    for (size_t i = 0; i < u->members.size(); ++i) {
      State &s = state[u->members[i].first][u->members[i].second];
      if (!s.masterIsWeights)
        offload.stageIn(stagedMaster.at(u->stagedAt[i]).data, s.masterHost);
      offload.stageIn(stagedM.at(u->stagedAt[i]).data, s.mHost);
      offload.stageIn(stagedV.at(u->stagedAt[i]).data, s.vHost);
    }
  });
}

void ParameterStore::optimizerStep(int group, bool stepUnderWay) {
  GroupUpdate *u = updateOf(group);
  if (!u || u->stepped)
    return;
  fetchOptimizerState(group); // when the schedule has no step of its own for it
  u->stepped = true;
  const AdamStep a = *pendingStep;
  if (!u->members.empty())
    streams.run(StreamKind::Compute, "optimizer step " + groupName(group), [&] {
      // In place, the group's tensors go to one adamWMany (on GPUs a few
      // multi-tensor launches) and their gradients are freed after it. With
      // fresh weight tensors each member steps and frees its gradient before
      // the next member's tensor is allocated, so the step's memory peak stays
      // the one the memory model prices (a gradient freed early may hold the
      // next tensor, which one launch for all could not allow).
      const ops::AdamWStep hyper{a.lr, a.beta1, a.beta2, a.eps, a.weightDecay, a.gradScale, a.step};
      std::vector<ops::AdamWTensor> steps;
      auto stepAndFree = [&](const std::vector<std::pair<size_t, size_t>> &done) {
        ops::adamWMany(steps, hyper);
        steps.clear();
        for (auto [p, l] : done) { // read by the launches just enqueued: stream-ordered release
          State &s = state[p][l];
          s.grad.clear();
          s.updateDue = false;
        }
      };
      for (size_t i = 0; i < u->members.size(); ++i) {
        auto [p, l] = u->members[i];
        State &s = state[p][l];
        DeviceTensor &master = masterOf(p, l);
        Tensor updatedWeights = weights(p, int(l)).tensor();
        if (!u->inPlace) {
          u->next[i].assignZeros(s.chunk);
          updatedWeights = u->next[i].tensor();
        }
        const float decay = spec.params[p].decay ? a.weightDecay : 0.f; // no_decay's kinds: 0
        const ConstTensor grad = gradSum(p, l).tensor();
        // The moments' device part and offloaded tail; the masters split the
        // same way unless they are the weights (then whole, stepped in place).
        const size_t head = s.m.size(), tail = s.mHost.size() / sizeof(float);
        float *tailMasters =
            s.masterIsWeights ? master.f32() + head : stagedMaster.f32() + u->stagedAt[i];
        steps.push_back(
            {master.f32(), s.m.f32(), s.v.f32(), updatedWeights, grad, int64_t(head), decay});
        if (tail > 0)
          steps.push_back({tailMasters, stagedM.f32() + u->stagedAt[i],
                           stagedV.f32() + u->stagedAt[i], updatedWeights + int64_t(head),
                           grad + int64_t(head), int64_t(tail), decay});
        if (!u->inPlace)
          stepAndFree({u->members[i]});
      }
      if (u->inPlace)
        stepAndFree(u->members);
    });
  u->last = streams.record(StreamKind::Compute);
  // ZeRO-3 without weight offload: the new slice is the weights until the
  // next gather, nothing to move.
  if (weightsSliced && spec.offloadWeights <= 0)
    for (size_t i = 0; i < u->members.size(); ++i)
      state[u->members[i].first][u->members[i].second].shard = std::move(u->next[i]);
  if (stepUnderWay) // what the step's beginStep left for now
    for (auto [p, l] : u->members)
      zeroSums(p, l);
  finishIfDone(*u);
}

bool ParameterStore::needsGather(const GroupUpdate &u) const {
  return !u.inPlace && sliced && !weightsSliced;
}

bool ParameterStore::needsWriteBack(const GroupUpdate &u) const {
  return u.staged > 0 || (!u.inPlace && spec.offloadWeights > 0);
}

void ParameterStore::gatherUpdatedWeights(int group) {
  auto under = updates.find(group);
  if (under == updates.end() || !under->second->stepped || under->second->gathered)
    return;
  std::shared_ptr<GroupUpdate> u = under->second;
  u->gathered = true;
  if (!needsGather(*u))
    return;
  // The weights kept in host memory come in whole for the gather and go
  // back out with the write-back.
  for (size_t i = 0; i < u->members.size(); ++i)
    u->resident[i] = state[u->members[i].first][u->members[i].second].resident;
  streams.wait(StreamKind::G2G, u->last);
  streams.run(StreamKind::G2G, "all-gather updated weights " + groupName(group), [this, u] {
    for (size_t i = 0; i < u->members.size(); ++i) {
      auto [p, l] = u->members[i];
      State &s = state[p][l];
      DeviceTensor &w = weights(p, int(l));
      if (!s.resident) {
        offload.swapIn(w, s.weightHost);
        s.resident = true;
      }
      unsplit(w, u->next[i], s.local);
      // Freed on the stream that last reads it, so the device layer
      // reuses the memory only after that read.
      u->next[i].clear();
    }
  });
  u->last = streams.record(StreamKind::G2G);
  finishIfDone(*u);
}

void ParameterStore::writeBackOptimizerState(int group) {
  auto under = updates.find(group);
  if (under == updates.end() || !under->second->stepped || under->second->written)
    return;
  std::shared_ptr<GroupUpdate> u = under->second;
  gatherUpdatedWeights(group); // the gathered weights are what goes out
  u->written = true;
  if (!needsWriteBack(*u)) {
    finishIfDone(*u);
    return;
  }
  streams.wait(StreamKind::D2H, u->last);
  streams.run(StreamKind::D2H, "swap out optimizer state " + groupName(group), [this, u] {
    for (size_t i = 0; i < u->members.size(); ++i) {
      auto [p, l] = u->members[i];
      State &s = state[p][l];
      if (u->staged > 0) {
        if (!s.masterIsWeights)
          offload.stageOut(stagedMaster.at(u->stagedAt[i]).data, s.masterHost);
        offload.stageOut(stagedM.at(u->stagedAt[i]).data, s.mHost);
        offload.stageOut(stagedV.at(u->stagedAt[i]).data, s.vHost);
      }
      if (u->inPlace || (weightsSliced && spec.offloadWeights <= 0))
        continue;          // the weights are in place already (optimizerStep)
      if (weightsSliced) { // the new slice, its tail to host memory
        offload.swapIn(s.shard, s.shardHost);
        s.shard = std::move(u->next[i]);
        offload.swapOut(s.shard, s.shardHost, spec.offloadWeights);
      } else if (sliced) { // gathered whole: the offloaded tail back out
        if (!u->resident[i]) {
          offload.swapOut(weights(p, int(l)), s.weightHost, spec.offloadWeights);
          s.resident = false;
        }
      } else { // the new weights, their tail to host memory
        DeviceTensor &w = weights(p, int(l));
        const bool wasResident = s.resident;
        if (!wasResident)
          offload.swapIn(w, s.weightHost);
        w = std::move(u->next[i]);
        if (!wasResident)
          offload.swapOut(w, s.weightHost, spec.offloadWeights);
      }
    }
  });
  u->last = streams.record(StreamKind::D2H);
  finishIfDone(*u);
}

void ParameterStore::finishIfDone(GroupUpdate &u) {
  if (!u.stepped || (needsGather(u) && !u.gathered) || (needsWriteBack(u) && !u.written))
    return;
  updated[size_t(u.group + 1)] = u.last;
  const int group = u.group;
  updates.erase(group); // `u` is gone after this
  if (updates.empty() &&
      std::none_of(groupPending.begin(), groupPending.end(), [](char c) { return c; }))
    finishDeferred();
}

bool ParameterStore::applyPendingStep(int group, bool stepUnderWay) {
  if (!updateOf(group))
    return false;
  fetchOptimizerState(group);
  optimizerStep(group, stepUnderWay);
  gatherUpdatedWeights(group);
  writeBackOptimizerState(group);
  return true;
}

void ParameterStore::completeUpdate(int group, bool stepUnderWay) {
  if (updates.count(group))
    applyPendingStep(group, stepUnderWay);
}

bool ParameterStore::updateDue(int group) const {
  const size_t g = size_t(group + 1);
  return updates.count(group) || (pendingStep && g < groupPending.size() && groupPending[g]);
}

void ParameterStore::finishDeferred() {
  for (size_t p = 0; p < state.size(); ++p)
    for (size_t l = 0; l < state[p].size(); ++l)
      if (state[p][l].updateDue)
        abortJob(std::string("the schedule's optimizer step left out ") + spec.params[p].name +
                 " (copy " + std::to_string(l) + ")");
  pendingStep.reset();
}

std::vector<float> ParameterStore::full(size_t p, int layer, ParamTensor what) {
  State &s = state[p][size_t(layer)];
  DeviceTensor local;
  switch (what) {
  case ParamTensor::Weight:
    if (weightsSliced) {
      offload.swapIn(s.shard, s.shardHost);
      unsplit(local, s.shard, s.local);
      offload.swapOut(s.shard, s.shardHost, spec.offloadWeights);
    } else {
      DeviceTensor &w = weights(p, layer);
      offload.swapIn(w, s.weightHost);
      local = w;
      if (!s.resident)
        offload.swapOut(w, s.weightHost, spec.offloadWeights);
    }
    break;
  case ParamTensor::Master:
  case ParamTensor::AdamM:
  case ParamTensor::AdamV: {
    swapInOptimizer(s);
    const DeviceTensor &part = what == ParamTensor::Master  ? masterOf(p, size_t(layer))
                               : what == ParamTensor::AdamM ? s.m
                                                            : s.v;
    if (sliced)
      unsplit(local, part, s.local);
    else
      local = part;
    swapOutOptimizer(s);
    break;
  }
  }
  return gatherOverTp(p, local);
}

void ParameterStore::load(size_t p, int layer, ParamTensor what,
                          const std::vector<float> &fullValues) {
  State &s = state[p][size_t(layer)];
  std::vector<float> values(s.local);
  const kernels::InitialValuesArgs map = shardMap(spec.params[p], tpRank, tp);
  for (size_t i = 0; i < s.local; ++i)
    values[i] = fullValues[size_t(kernels::math::fullIndex(map, int64_t(i)))];
  DeviceTensor local(DType::F32);
  local.upload(values);
  swapInOptimizer(s); // kept offloaded since initialize; out again below
  switch (what) {
  case ParamTensor::Weight:
    weights(p, layer).upload(values); // before settle: every weight is resident
    break;
  case ParamTensor::Master:
    // The weights follow from the masters (rounded to their type), whatever
    // precision wrote the checkpoint: a bf16 run's weights into an fp32
    // plan would otherwise start it from rounded values.
    weights(p, layer).upload(values);
    if (!s.masterIsWeights)
      s.master = sliced ? slice(local, s.chunk) : local;
    break;
  case ParamTensor::AdamM:
    s.m = sliced ? slice(local, s.chunk) : local;
    break;
  case ParamTensor::AdamV:
    s.v = sliced ? slice(local, s.chunk) : local;
    break;
  }
  swapOutOptimizer(s);
}

} // namespace mist::rt
