//===- ParameterValues.cpp - Initial values, checkpoints --------------------===//
#include "runtime/trainer/ParameterValues.h"

#include "runtime/comm/MpiCommunicator.h"
#include "runtime/ops/Ops.h"
#include <algorithm>

namespace mist::rt {

ParameterValues::ParameterValues(ParameterTable &table) : ParameterView(table) {
  for (size_t p = 0; p < state.size(); ++p)
    for (size_t l = 0; l < state[p].size(); ++l)
      // Gradients that stay whole until the step (no ZeRO-2) and have one
      // buffer are summed over the micro-batches in that buffer; ZeRO-1 then
      // reduce-scatters it into the rank's slice (GradientSums).
      state[p][l].sumsInPlace =
          !gradsSliced && gradArrays(p, l).size() == 1 && spec.offloadGrads <= 0;
  // ZeRO-2's and offloaded sums' gradient buffers exist only around the
  // backward writing them.
  for (size_t p = 0; p < state.size(); ++p)
    if (foldedPerRegion(p))
      for (size_t l = 0; l < state[p].size(); ++l)
        for (int g : spec.params[p].grads)
          gradBuffer(g, int(l)).clear();
}

void ParameterValues::initialize(uint64_t seed, int hostThreads, bool draw) {
  for (size_t p = 0; p < state.size(); ++p)
    for (size_t l = 0; l < state[p].size(); ++l) {
      const ParamSpec &ps = spec.params[p];
      State &s = state[p][l];
      const int layer = spec.buffers[ps.buffer].layer ? spec.globalLayer(int(l)) : 0;
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

void ParameterValues::settle() {
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
}

void ParameterValues::swapOutOptimizer(State &s) {
  offload.swapOut(s.master, s.masterHost, spec.offloadOptimizer);
  offload.swapOut(s.m, s.mHost, spec.offloadOptimizer);
  offload.swapOut(s.v, s.vHost, spec.offloadOptimizer);
}

void ParameterValues::swapInOptimizer(State &s) {
  offload.swapIn(s.master, s.masterHost);
  offload.swapIn(s.m, s.mHost);
  offload.swapIn(s.v, s.vHost);
}

std::vector<float> ParameterValues::full(size_t p, int layer, ParamTensor what) {
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

void ParameterValues::load(size_t p, int layer, ParamTensor what,
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
