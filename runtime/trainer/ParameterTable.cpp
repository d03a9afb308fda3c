//===- ParameterTable.cpp - A stage's parameter tensors ---------------------===//
#include "runtime/trainer/ParameterTable.h"

#include "runtime/comm/MpiCommunicator.h"
#include "runtime/ops/Ops.h"
#include <algorithm>

namespace mist::rt {

ParameterTable::ParameterTable(const StageSpec &stage, Frame &global, std::vector<Frame> &layers,
                               StageGroups groups, OffloadEngine &offload, Streams &streams)
    : spec(stage), global(global), layers(layers), groups(groups), offload(offload),
      streams(streams), tpRank(groups.tp.rank()), dpRank(groups.dp.rank()), tp(groups.tp.size()),
      dp(groups.dp.size()) {
  sliced = spec.zeroOptimizer && dp > 1;
  gradsSliced = sliced && spec.zeroGrads;
  weightsSliced = gradsSliced && spec.zeroWeights;
  updated.assign(size_t(spec.layers) + 2, Event{});
  state.resize(spec.params.size());
  for (size_t p = 0; p < spec.params.size(); ++p) {
    const ParamSpec &ps = spec.params[p];
    const BufferSpec &weight = spec.buffers[size_t(ps.buffer)];
    state[p].resize(weight.layer ? size_t(spec.layers) : 1);
    for (ParamState &s : state[p]) {
      s.local = size_t(weight.elements);
      s.chunk = sliced ? (s.local + size_t(dp) - 1) / size_t(dp) : s.local;
      // fp32 weights that stay whole on this rank are their own masters
      // (only the moments are then offloaded with the optimizer state).
      s.weightsInPlace = !sliced && spec.offloadWeights <= 0;
      s.masterIsWeights = s.weightsInPlace && weight.dtype == DType::F32;
      s.grad.setDType(spec.buffers[size_t(ps.grads[0])].dtype);
      s.shard.setDType(weight.dtype);
    }
  }
}

ParameterView::ParameterView(ParameterTable &t)
    : spec(t.spec), global(t.global), layers(t.layers), groups(t.groups), offload(t.offload),
      streams(t.streams), tpRank(t.tpRank), dpRank(t.dpRank), tp(t.tp), dp(t.dp), sliced(t.sliced),
      gradsSliced(t.gradsSliced), weightsSliced(t.weightsSliced), state(t.state),
      updated(t.updated) {}

size_t ParameterView::slot(StageRegion region) const {
  return region.kind == RegionKind::Pre     ? 0
         : region.kind == RegionKind::Layer ? 1 + size_t(region.layer)
                                            : size_t(spec.layers) + 1;
}

StageRegion ParameterView::regionOf(size_t p, size_t copy) const {
  const ParamSpec &ps = spec.params[p];
  if (spec.buffers[ps.buffer].layer)
    return StageRegion::ofLayer(int(copy));
  return uses(ps, RegionKind::Pre) ? StageRegion::pre() : StageRegion::post();
}

ParameterView::Copies ParameterView::membersOf(StageRegion region) const {
  Copies members;
  for (size_t p = 0; p < state.size(); ++p)
    for (size_t l = 0; l < state[p].size(); ++l)
      if (regionOf(p, l) == region)
        members.push_back({p, l});
  return members;
}

std::string ParameterView::regionName(StageRegion region) const {
  return region.kind == RegionKind::Layer
             ? "layer " + std::to_string(spec.globalLayer(region.layer))
         : region.kind == RegionKind::Pre ? std::string("pre")
                                          : std::string("post");
}

DeviceTensor &ParameterView::weights(size_t p, int layer) {
  const int b = spec.params[p].buffer;
  return spec.buffers[b].layer ? layers[size_t(layer)].vec(b) : global.vec(b);
}

DeviceTensor &ParameterView::gradBuffer(int buffer, int layer) {
  return spec.buffers[buffer].layer ? layers[size_t(layer)].vec(buffer) : global.vec(buffer);
}

DeviceTensor &ParameterView::gradSum(size_t p, size_t copy) {
  State &s = state[p][copy];
  // Summed in place: the buffer, until ZeRO-1 reduce-scatters it into s.grad.
  return s.sumsInPlace && s.grad.empty() ? gradBuffer(spec.params[p].grads[0], int(copy)) : s.grad;
}

std::vector<DeviceTensor *> ParameterView::gradArrays(size_t p, size_t copy) {
  std::vector<DeviceTensor *> arrays;
  for (int g : spec.params[p].grads) {
    DeviceTensor *a = &gradBuffer(g, int(copy));
    if (std::find(arrays.begin(), arrays.end(), a) == arrays.end())
      arrays.push_back(a); // buffers sharing one array count once
  }
  return arrays;
}

DeviceTensor &ParameterView::masterOf(size_t p, size_t copy) {
  State &s = state[p][copy];
  return s.masterIsWeights ? weights(p, int(copy)) : s.master;
}

bool ParameterView::uses(const ParamSpec &ps, RegionKind region) const {
  return std::find(ps.regions.begin(), ps.regions.end(), region) != ps.regions.end();
}

// This dp rank's flat slice of a tp-local tensor (the last one zero-padded).
DeviceTensor ParameterView::slice(const DeviceTensor &local, size_t chunk) const {
  DeviceTensor out(local.dtype());
  out.assignZeros(chunk);
  const size_t begin = size_t(dpRank) * chunk;
  if (begin < local.size())
    device::copy(out.data(), local.at(begin).data,
                 std::min(chunk, local.size() - begin) * bytesOf(local.dtype()));
  return out;
}

// This tp rank's whole tensor from the dp ranks' slices.
void ParameterView::unsplit(DeviceTensor &into, const DeviceTensor &part, size_t n) {
  DeviceTensor all(part.dtype());
  all.assignZeros(part.size() * size_t(dp));
  groups.dp.allGather(part.data(), all.data(), part.size(), part.dtype());
  all.resize(n);
  into = std::move(all);
}

// A tensor of this tp rank's shape as the full tensor.
std::vector<float> ParameterView::gatherOverTp(size_t p, const DeviceTensor &local) {
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

ParameterView::Copies ParameterView::paramsOf(StageRegion region) const {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t p = 0; p < state.size(); ++p)
    if (uses(spec.params[p], region.kind))
      out.push_back({p, spec.buffers[spec.params[p].buffer].layer ? size_t(region.layer) : 0});
  return out;
}

// ZeRO-2 folds each region's gradients into the rank's slice at once; offloaded
// gradients are folded into the step's sum (mostly on the host) the same way,
// so neither keeps every layer's gradient buffer for the whole backward (the
// memory model counts two layers' buffers beside the resident sum).
RegionKind ParameterView::lastBackwardOf(const ParamSpec &ps) const {
  return uses(ps, RegionKind::Pre)     ? RegionKind::Pre
         : uses(ps, RegionKind::Layer) ? RegionKind::Layer
                                       : RegionKind::Post;
}

bool ParameterView::foldedPerRegion(size_t p) const {
  return gradsSliced ? !tied(p) : spec.offloadGrads > 0;
}

} // namespace mist::rt
