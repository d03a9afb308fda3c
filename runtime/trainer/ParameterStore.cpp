//===- ParameterStore.cpp - One stage's parameters and optimizer state ----===//
#include "runtime/trainer/ParameterStore.h"

#include "runtime/comm/MpiCommunicator.h"
#include "stdlib/kernels/adamw/AdamW.h"
#include <algorithm>

namespace mist::rt {

ParameterStore::ParameterStore(const StageSpec &stage, Frame &global, std::vector<Frame> &layers,
                               StageGroups groups, OffloadEngine &offload, Streams &streams)
    : spec(stage), global(global), layers(layers), groups(groups), offload(offload),
      streams(streams), tpRank(groups.tp.rank()), dpRank(groups.dp.rank()), tp(groups.tp.size()),
      dp(groups.dp.size()) {
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
    }
  }
}

std::vector<float> &ParameterStore::weights(size_t p, int layer) {
  const int b = spec.params[p].buffer;
  return spec.buffers[b].layer ? layers[size_t(layer)].vec(b) : global.vec(b);
}

std::vector<float> &ParameterStore::gradBuffer(int buffer, int layer) {
  return spec.buffers[buffer].layer ? layers[size_t(layer)].vec(buffer) : global.vec(buffer);
}

bool ParameterStore::uses(const ParamSpec &ps, RegionKind region) const {
  return std::find(ps.regions.begin(), ps.regions.end(), region) != ps.regions.end();
}

// This dp rank's flat slice of a tp-local tensor (the last one zero-padded).
std::vector<float> ParameterStore::slice(const std::vector<float> &local, size_t chunk) const {
  std::vector<float> out(chunk, 0.f);
  const size_t begin = size_t(dpRank) * chunk;
  for (size_t i = 0; i < chunk && begin + i < local.size(); ++i)
    out[i] = local[begin + i];
  return out;
}

// This tp rank's whole tensor from the dp ranks' slices.
std::vector<float> ParameterStore::unsplit(const std::vector<float> &part, size_t n) {
  std::vector<float> all(part.size() * size_t(dp));
  groups.dp.allGather(part.data(), all.data(), part.size());
  all.resize(n);
  return all;
}

// A tensor of this tp rank's shape as the full tensor.
std::vector<float> ParameterStore::gatherOverTp(size_t p, const std::vector<float> &local) {
  const ParamSpec &ps = spec.params[p];
  if (ps.shardAxis < 0 || tp == 1)
    return local;
  std::vector<float> all(local.size() * size_t(tp)), fullValues(all.size());
  groups.tp.allGather(local.data(), all.data(), local.size());
  for (int r = 0; r < tp; ++r)
    for (size_t i = 0; i < local.size(); ++i)
      fullValues[size_t(fullIndexOf(ps, r, tp, int64_t(i)))] = all[size_t(r) * local.size() + i];
  return fullValues;
}

void ParameterStore::initialize(uint64_t seed) {
  for (size_t p = 0; p < state.size(); ++p)
    for (size_t l = 0; l < state[p].size(); ++l) {
      const ParamSpec &ps = spec.params[p];
      State &s = state[p][l];
      std::vector<float> &w = weights(p, int(l));
      w.resize(s.local);
      const int layer = spec.buffers[ps.buffer].layer ? spec.firstLayer + int(l) : 0;
      for (size_t i = 0; i < s.local; ++i)
        w[i] = initialValue(ps.name, layer, fullIndexOf(ps, tpRank, tp, int64_t(i)), seed);
      s.master = sliced ? slice(w, s.chunk) : w;
      s.m.assign(s.chunk, 0.f);
      s.v.assign(s.chunk, 0.f);
      s.resident = true;
    }
}

void ParameterStore::settle() {
  for (size_t p = 0; p < state.size(); ++p)
    for (size_t l = 0; l < state[p].size(); ++l) {
      State &s = state[p][l];
      std::vector<float> &w = weights(p, int(l));
      if (weightsSliced) {
        s.shard = slice(w, s.chunk);
        offload.swapOut(s.shard, s.shardHost, spec.offloadWeights);
        std::vector<float>().swap(w);
        s.resident = false;
      } else if (spec.offloadWeights > 0) {
        offload.swapOut(w, s.weightHost, spec.offloadWeights);
        s.resident = false;
      }
      swapOutOptimizer(s);
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

void ParameterStore::acquire(RegionKind region, int layer) {
  // The region's weights as the last optimizer step left them.
  const int group = region == RegionKind::Layer ? layer
                    : region == RegionKind::Pre ? -1
                                                : spec.layers;
  if (size_t(group + 1) < updated.size() && updated[size_t(group + 1)].recorded)
    streams.wait(StreamKind::Compute, updated[size_t(group + 1)]);
  if (!weightsSliced && spec.offloadWeights <= 0)
    return; // weights stay where they are
  streams.run(weightsSliced ? StreamKind::G2G : StreamKind::H2D,
              (weightsSliced ? "all-gather weights " : "swap in weights ") +
                  regionName(region, layer),
              [&] {
                for (auto [p, l] : paramsOf(region, layer)) {
                  State &s = state[p][l];
                  if (s.resident)
                    continue;
                  std::vector<float> &w = weights(p, int(l));
                  if (weightsSliced) {
                    offload.swapIn(s.shard, s.shardHost);
                    w = unsplit(s.shard, s.local);
                    offload.swapOut(s.shard, s.shardHost, spec.offloadWeights);
                  } else {
                    offload.swapIn(w, s.weightHost);
                  }
                  s.resident = true;
                }
              });
}

void ParameterStore::release(RegionKind region, int layer) {
  if (!weightsSliced && spec.offloadWeights <= 0)
    return; // weights stay where they are
  auto drop = [&] {
    for (auto [p, l] : paramsOf(region, layer)) {
      State &s = state[p][l];
      if (!s.resident)
        continue;
      std::vector<float> &w = weights(p, int(l));
      if (weightsSliced)
        std::vector<float>().swap(w); // the slice is the only copy between uses
      else
        offload.swapOut(w, s.weightHost, spec.offloadWeights);
      s.resident = false;
    }
  };
  if (weightsSliced)
    drop(); // nothing moves: the gathered copy is freed
  else
    streams.run(StreamKind::D2H, "swap out weights " + regionName(region, layer), drop);
}

void ParameterStore::beginStep() {
  for (size_t p = 0; p < state.size(); ++p)
    for (State &s : state[p]) {
      // A tied weight's gradients are summed over two stages whose slices
      // may differ: they stay whole until reduceGradients.
      s.grad.assign(gradsSliced && !tied(p) ? s.chunk : s.local, 0.f);
      s.gradHost.clear();
      offload.swapOut(s.grad, s.gradHost, spec.offloadGrads);
    }
}

void ParameterStore::clearGradBuffers() {
  for (size_t p = 0; p < state.size(); ++p)
    for (size_t l = 0; l < state[p].size(); ++l)
      for (int g : spec.params[p].grads) {
        std::vector<float> &buf = gradBuffer(g, int(l));
        std::fill(buf.begin(), buf.end(), 0.f);
      }
}

void ParameterStore::foldGradBuffers() {
  streams.run(gradsSliced ? StreamKind::G2G : StreamKind::Compute,
              gradsSliced ? "reduce-scatter gradients" : "accumulate gradients", [&] {
                for (size_t p = 0; p < state.size(); ++p)
                  for (size_t l = 0; l < state[p].size(); ++l) {
                    State &s = state[p][l];
                    std::vector<float> sum(s.local, 0.f);
                    for (int g : spec.params[p].grads) {
                      const std::vector<float> &src = gradBuffer(g, int(l));
                      for (size_t i = 0; i < s.local && i < src.size(); ++i)
                        sum[i] += src[i];
                    }
                    if (gradsSliced && !tied(p)) { // summed over dp into this rank's slice at once
                      std::vector<float> padded(s.chunk * size_t(dp), 0.f), part(s.chunk);
                      std::copy(sum.begin(), sum.end(), padded.begin());
                      groups.dp.reduceScatterSum(padded.data(), part.data(), s.chunk);
                      sum.swap(part);
                    }
                    offload.swapIn(s.grad, s.gradHost);
                    for (size_t i = 0; i < s.grad.size(); ++i)
                      s.grad[i] += sum[i];
                    offload.swapOut(s.grad, s.gradHost, spec.offloadGrads);
                  }
              });
}

void ParameterStore::reduceGradients() {
  streams.run(StreamKind::G2G, "reduce gradients over dp", [&] {
    for (size_t p = 0; p < state.size(); ++p)
      for (State &s : state[p]) {
        offload.swapIn(s.grad, s.gradHost);
        const ParamSpec &ps = spec.params[p];
        if (tied(p)) {
          // Sum the full tensor over both stages' ranks: each tp rank adds its
          // shard (a replicated tensor: tp rank 0 only), each dp rank its sum.
          int64_t fullSize = 1;
          for (int64_t d : ps.shape)
            fullSize *= d;
          std::vector<float> fullGrad(size_t(fullSize), 0.f);
          const bool sharded = ps.shardAxis >= 0 && tp > 1;
          if (sharded || tpRank == 0)
            for (size_t i = 0; i < s.local; ++i)
              fullGrad[size_t(fullIndexOf(ps, tpRank, tp, int64_t(i)))] = s.grad[i];
          groups.tied->allReduceSum(fullGrad.data(), fullGrad.size());
          std::vector<float> local(s.local);
          for (size_t i = 0; i < s.local; ++i)
            local[i] = fullGrad[size_t(fullIndexOf(ps, tpRank, tp, int64_t(i)))];
          s.grad = sliced ? slice(local, s.chunk) : local;
        } else if (gradsSliced) {
          // already summed into the slice, micro-batch by micro-batch
        } else if (sliced) {
          std::vector<float> padded(s.chunk * size_t(dp), 0.f), part(s.chunk);
          std::copy(s.grad.begin(), s.grad.end(), padded.begin());
          groups.dp.reduceScatterSum(padded.data(), part.data(), s.chunk);
          s.grad.swap(part);
        } else if (dp > 1) {
          groups.dp.allReduceSum(s.grad.data(), s.grad.size());
        }
      }
  });
}

double ParameterStore::normSquaredShare() const {
  double sum = 0;
  for (size_t p = 0; p < state.size(); ++p) {
    const ParamSpec &ps = spec.params[p];
    if (tied(p) && !groups.firstStage)
      continue; // the first stage counts the tied weight
    const bool sharded = ps.shardAxis >= 0 && tp > 1;
    if ((!sharded && tpRank != 0) || (!sliced && dpRank != 0))
      continue; // a replica: another rank counts it
    for (const State &s : state[p])
      for (float g : s.grad)
        sum += double(g) * g;
  }
  return sum;
}

int ParameterStore::groupOf(size_t p, size_t copy) const {
  const ParamSpec &ps = spec.params[p];
  if (spec.buffers[ps.buffer].layer)
    return int(copy);
  return uses(ps, RegionKind::Pre) ? -1 : spec.layers;
}

void ParameterStore::beginOptimizerStep() { updated.assign(size_t(spec.layers) + 2, Event{}); }

void ParameterStore::endOptimizerStep() {
  for (size_t p = 0; p < state.size(); ++p)
    for (size_t l = 0; l < state[p].size(); ++l)
      if (!state[p][l].grad.empty()) // stepGroup drops the gradient sums it used
        abortJob(std::string("the schedule's optimizer step left out ") + spec.params[p].name +
                 " (copy " + std::to_string(l) + ")");
}

void ParameterStore::stepGroup(const AdamStep &a, int group) {
  std::vector<std::pair<size_t, size_t>> members; // (param, copy)
  for (size_t p = 0; p < state.size(); ++p)
    for (size_t l = 0; l < state[p].size(); ++l)
      if (groupOf(p, l) == group)
        members.push_back({p, l});
  if (members.empty())
    return;
  const RegionKind region = group < 0              ? RegionKind::Pre
                            : group == spec.layers ? RegionKind::Post
                                                   : RegionKind::Layer;
  const std::string name = regionName(region, group);
  if (spec.offloadOptimizer > 0)
    streams.run(StreamKind::H2D, "swap in optimizer state " + name, [&] {
      for (auto [p, l] : members)
        swapInOptimizer(state[p][l]);
    });
  std::vector<std::vector<float>> next(members.size());
  streams.run(StreamKind::Compute, "optimizer step " + name, [&] {
    for (size_t i = 0; i < members.size(); ++i) {
      State &s = state[members[i].first][members[i].second];
      next[i].resize(s.chunk);
      mist::kernels::adamWRef({s.master.data(), s.m.data(), s.v.data(), next[i].data(),
                               s.grad.data(), int64_t(s.chunk), a.lr, a.beta1, a.beta2, a.eps,
                               a.weightDecay, a.gradScale, a.step});
      std::vector<float>().swap(s.grad);
    }
  });
  if (spec.offloadOptimizer > 0)
    streams.run(StreamKind::D2H, "swap out optimizer state " + name, [&] {
      for (auto [p, l] : members)
        swapOutOptimizer(state[p][l]);
    });
  const StreamKind writer = sliced ? StreamKind::G2G : StreamKind::Compute;
  streams.wait(writer, streams.record(StreamKind::Compute));
  streams.run(writer, (sliced ? "all-gather updated weights " : "write updated weights ") + name,
              [&] {
                for (size_t i = 0; i < members.size(); ++i)
                  writeUpdatedWeights(members[i].first, members[i].second, next[i]);
              });
  updated[size_t(group + 1)] = streams.record(writer);
}

void ParameterStore::writeUpdatedWeights(size_t p, size_t l, std::vector<float> &next) {
  State &s = state[p][l];
  if (weightsSliced) { // the new slice is the weights until the next gather
    offload.swapIn(s.shard, s.shardHost);
    s.shard = next;
    offload.swapOut(s.shard, s.shardHost, spec.offloadWeights);
    return;
  }
  std::vector<float> &w = weights(p, int(l));
  const bool wasResident = s.resident;
  if (!s.resident) {
    offload.swapIn(w, s.weightHost);
    s.resident = true;
  }
  w = sliced ? unsplit(next, s.local) : next;
  if (!wasResident) {
    offload.swapOut(w, s.weightHost, spec.offloadWeights);
    s.resident = false;
  }
}

std::vector<float> ParameterStore::full(size_t p, int layer, ParamTensor what) {
  State &s = state[p][size_t(layer)];
  std::vector<float> local;
  switch (what) {
  case ParamTensor::Weight:
    if (weightsSliced) {
      offload.swapIn(s.shard, s.shardHost);
      local = unsplit(s.shard, s.local);
      offload.swapOut(s.shard, s.shardHost, spec.offloadWeights);
    } else {
      std::vector<float> &w = weights(p, layer);
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
    const std::vector<float> &part = what == ParamTensor::Master  ? s.master
                                     : what == ParamTensor::AdamM ? s.m
                                                                  : s.v;
    local = sliced ? unsplit(part, s.local) : part;
    swapOutOptimizer(s);
    break;
  }
  }
  return gatherOverTp(p, local);
}

void ParameterStore::load(size_t p, int layer, ParamTensor what,
                          const std::vector<float> &fullValues) {
  State &s = state[p][size_t(layer)];
  std::vector<float> local(s.local);
  for (size_t i = 0; i < s.local; ++i)
    local[i] = fullValues[size_t(fullIndexOf(spec.params[p], tpRank, tp, int64_t(i)))];
  switch (what) {
  case ParamTensor::Weight:
    weights(p, layer) = local; // before settle: every weight is resident
    break;
  case ParamTensor::Master:
    s.master = sliced ? slice(local, s.chunk) : local;
    break;
  case ParamTensor::AdamM:
    s.m = sliced ? slice(local, s.chunk) : local;
    break;
  case ParamTensor::AdamV:
    s.v = sliced ? slice(local, s.chunk) : local;
    break;
  }
}

} // namespace mist::rt
