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

std::string ParameterStore::bringName(RegionKind region, int layer) const {
  return (weightsSliced ? "all-gather weights " : "swap in weights ") + regionName(region, layer);
}

void ParameterStore::bring(RegionKind region, int layer) {
  for (auto [p, l] : paramsOf(region, layer)) {
    State &s = state[p][l];
    if (s.resident)
      continue;
    DeviceTensor &w = weights(p, int(l));
    if (weightsSliced) {
      offload.swapIn(s.shard, s.shardHost);
      unsplit(w, s.shard, s.local);
      offload.swapOut(s.shard, s.shardHost, spec.offloadWeights);
    } else {
      offload.swapIn(w, s.weightHost);
    }
    s.resident = true;
  }
}

// Issued before the compute of the region ahead of this one is enqueued, so
// the gather or copy runs beside it; the stream waits for the compute work
// enqueued so far (which released these weights last) and for the group's
// last update, and acquire makes compute wait for the event it records.
void ParameterStore::prefetch(RegionKind region, int layer) {
  if (!movesWeights())
    return;
  const size_t g = size_t(groupOfRegion(region, layer) + 1);
  const StreamKind mover = weightsSliced ? StreamKind::G2G : StreamKind::H2D;
  streams.wait(mover, streams.record(StreamKind::Compute));
  if (g < updated.size() && updated[g].recorded())
    streams.wait(mover, updated[g]);
  streams.run(mover, bringName(region, layer), [this, region, layer] { bring(region, layer); });
  prefetched[g] = streams.record(mover);
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
    return;
  }
  streams.runFenced(weightsSliced ? StreamKind::G2G : StreamKind::H2D, bringName(region, layer),
                    [&] { bring(region, layer); });
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

void ParameterStore::foldRegionGradients(RegionKind region, int layer) {
  std::vector<std::pair<size_t, size_t>> toFold;
  for (auto [p, l] : paramsOf(region, layer))
    // ZeRO-2 reduce-scatters a weight pre and post share once, after pre's
    // backward; an offloaded sum takes each region's part as it is made.
    if (foldedPerRegion(p) &&
        (gradsSliced ? lastBackwardOf(spec.params[p]) == region : uses(spec.params[p], region)))
      toFold.push_back({p, l});
  if (toFold.empty())
    return;
  // After the backward that wrote them, beside the next region's compute
  // (which allocates its own buffers); the step's reduceGradients fence
  // makes the optimizer wait for every fold. Offloaded sums without ZeRO-2
  // are accumulated in order on the compute stream.
  const StreamKind folder = gradsSliced ? StreamKind::G2G : StreamKind::Compute;
  if (folder != StreamKind::Compute)
    streams.wait(folder, streams.record(StreamKind::Compute));
  const std::string what = gradsSliced ? "reduce-scatter gradients " : "accumulate gradients ";
  streams.run(folder, what + regionName(region, layer), [this, toFold] {
    for (auto [p, l] : toFold) {
      foldInto(p, l);
      for (int g : spec.params[p].grads)
        gradBuffer(g, int(l)).clear(); // allocated again by the next micro-batch's backward
    }
  });
  folded[size_t(groupOfRegion(region, layer) + 1)] = streams.record(folder);
}

void ParameterStore::foldInto(size_t p, size_t l) {
  State &s = state[p][l];
  // The micro-batch's gradient: the sum of the buffers contributing to the
  // parameter (a tied weight has one per region reading it).
  const bool scatter = gradsSliced && !tied(p);
  const std::vector<DeviceTensor *> sources = gradArrays(p, l);
  // One buffer that splits evenly over dp is scattered as it is; otherwise
  // the buffers are summed (zero-padded) first.
  const bool direct = scatter && sources.size() == 1 && sources[0]->size() == s.chunk * size_t(dp);
  const DType type = gradType(p);
  if (!scatter && sources.size() == 1) { // added to the step's sum as it is
    offload.swapIn(s.grad, s.gradHost);
    device::accumulate(s.grad.tensor(), sources[0]->tensor(),
                       std::min(s.local, sources[0]->size()));
    offload.swapOut(s.grad, s.gradHost, spec.offloadGrads);
    return;
  }
  DeviceTensor sum(type);
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
  offload.swapIn(s.grad, s.gradHost);
  device::accumulate(s.grad.tensor(), sum.tensor(), s.grad.size());
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
  return dp > 1 && !gradsSliced && !tied(p) && state[p][copy].sumsInPlace;
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
  // After the backward that completed the sums; the step's reduceGradients
  // fence, later on the same stream, makes the norm and the optimizer wait.
  streams.wait(StreamKind::G2G, streams.record(StreamKind::Compute));
  streams.run(StreamKind::G2G,
              (sliced ? "reduce-scatter gradients " : "all-reduce gradients ") +
                  regionName(region, layer),
              [this, toReduce] {
                for (auto [p, l] : toReduce)
                  reduceOverDp(p, l);
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

bool ParameterStore::applyPendingStep(int group, bool stepUnderWay) {
  const size_t g = size_t(group + 1);
  if (!pendingStep || g >= groupPending.size() || !groupPending[g])
    return false;
  groupPending[g] = 0;
  stepGroup(*pendingStep, group);
  if (stepUnderWay) // what the step's beginStep left for now
    for (auto [p, l] : membersOf(group))
      zeroSums(p, l);
  if (std::none_of(groupPending.begin(), groupPending.end(), [](char c) { return c; }))
    finishDeferred();
  return true;
}

void ParameterStore::finishDeferred() {
  for (size_t p = 0; p < state.size(); ++p)
    for (size_t l = 0; l < state[p].size(); ++l)
      if (state[p][l].updateDue)
        abortJob(std::string("the schedule's optimizer step left out ") + spec.params[p].name +
                 " (copy " + std::to_string(l) + ")");
  pendingStep.reset();
}

void ParameterStore::stepGroup(const AdamStep &a, int group) {
  const std::vector<std::pair<size_t, size_t>> members = membersOf(group);
  if (members.empty())
    return;
  const RegionKind region = group < 0              ? RegionKind::Pre
                            : group == spec.layers ? RegionKind::Post
                                                   : RegionKind::Layer;
  const std::string name = regionName(region, group);
  // Offloaded optimizer state: the tails of the group's masters and moments
  // come into one staging buffer each (members one after the other), are
  // stepped there, and go back; the device parts are stepped in place.
  std::vector<size_t> stagedAt(members.size(), 0);
  size_t staged = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    stagedAt[i] = staged;
    staged += state[members[i].first][members[i].second].mHost.size() / sizeof(float);
  }
  if (staged > 0) {
    if (stagedM.size() < staged) {
      stagedM.assignZeros(staged);
      stagedV.assignZeros(staged);
      if (!state[members[0].first][members[0].second].masterIsWeights)
        stagedMaster.assignZeros(staged);
    }
    streams.runFenced(StreamKind::H2D, "swap in optimizer state " + name, [&] {
      for (size_t i = 0; i < members.size(); ++i) {
        State &s = state[members[i].first][members[i].second];
        if (!s.masterIsWeights)
          offload.stageIn(stagedMaster.at(stagedAt[i]).data, s.masterHost);
        offload.stageIn(stagedM.at(stagedAt[i]).data, s.mHost);
        offload.stageIn(stagedV.at(stagedAt[i]).data, s.vHost);
      }
    });
  }
  // Without ZeRO-1 or weight offload AdamW writes the new weights straight
  // into them (in fp32 the weights are the masters, updated in place);
  // otherwise into a fresh tensor that writeUpdatedWeights puts in place.
  const bool inPlace = state[members[0].first][members[0].second].weightsInPlace;
  // Shared with the writer's work, which may run after this returns.
  auto next = std::make_shared<std::vector<DeviceTensor>>();
  for (auto [p, l] : members)
    next->emplace_back(weightType(p));
  streams.run(StreamKind::Compute, "optimizer step " + name, [&] {
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
    for (size_t i = 0; i < members.size(); ++i) {
      auto [p, l] = members[i];
      State &s = state[p][l];
      DeviceTensor &master = masterOf(p, l);
      Tensor updatedWeights = weights(p, int(l)).tensor();
      if (!inPlace) {
        (*next)[i].assignZeros(s.chunk);
        updatedWeights = (*next)[i].tensor();
      }
      const float decay = spec.params[p].decay ? a.weightDecay : 0.f; // no_decay's kinds: 0
      const ConstTensor grad = gradSum(p, l).tensor();
      // The moments' device part and offloaded tail; the masters split the
      // same way unless they are the weights (then whole, stepped in place).
      const size_t head = s.m.size(), tail = s.mHost.size() / sizeof(float);
      float *tailMasters =
          s.masterIsWeights ? master.f32() + head : stagedMaster.f32() + stagedAt[i];
      steps.push_back(
          {master.f32(), s.m.f32(), s.v.f32(), updatedWeights, grad, int64_t(head), decay});
      if (tail > 0)
        steps.push_back({tailMasters, stagedM.f32() + stagedAt[i], stagedV.f32() + stagedAt[i],
                         updatedWeights + int64_t(head), grad + int64_t(head), int64_t(tail),
                         decay});
      if (!inPlace)
        stepAndFree({members[i]});
    }
    if (inPlace)
      stepAndFree(members);
  });
  if (staged > 0)
    streams.runFenced(StreamKind::D2H, "swap out optimizer state " + name, [&] {
      for (size_t i = 0; i < members.size(); ++i) {
        State &s = state[members[i].first][members[i].second];
        if (!s.masterIsWeights)
          offload.stageOut(stagedMaster.at(stagedAt[i]).data, s.masterHost);
        offload.stageOut(stagedM.at(stagedAt[i]).data, s.mHost);
        offload.stageOut(stagedV.at(stagedAt[i]).data, s.vHost);
      }
    });
  const StreamKind writer = sliced ? StreamKind::G2G : StreamKind::Compute;
  if (!inPlace) {
    streams.wait(writer, streams.record(StreamKind::Compute));
    streams.run(writer, (sliced ? "all-gather updated weights " : "write updated weights ") + name,
                [this, members, next] {
                  for (size_t i = 0; i < members.size(); ++i) {
                    writeUpdatedWeights(members[i].first, members[i].second, (*next)[i]);
                    // Freed on the stream that last reads it, so the device
                    // layer reuses the memory only after that read.
                    (*next)[i].clear();
                  }
                });
  }
  updated[size_t(group + 1)] = streams.record(writer);
}

void ParameterStore::writeUpdatedWeights(size_t p, size_t l, DeviceTensor &next) {
  State &s = state[p][l];
  if (weightsSliced) { // the new slice is the weights until the next gather
    offload.swapIn(s.shard, s.shardHost);
    s.shard = std::move(next);
    offload.swapOut(s.shard, s.shardHost, spec.offloadWeights);
    return;
  }
  DeviceTensor &w = weights(p, int(l));
  const bool wasResident = s.resident;
  if (!s.resident) {
    offload.swapIn(w, s.weightHost);
    s.resident = true;
  }
  if (sliced)
    unsplit(w, next, s.local);
  else
    w = std::move(next);
  if (!wasResident) {
    offload.swapOut(w, s.weightHost, spec.offloadWeights);
    s.resident = false;
  }
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
