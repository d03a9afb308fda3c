//===- ActivationStash.cpp - Activations of micro-batches in flight -------===//
#include "runtime/trainer/ActivationStash.h"

#include "runtime/comm/MpiCommunicator.h"

namespace mist::rt {

ActivationStash::ActivationStash(const StageSpec &stage, OffloadEngine &offload)
    : spec(stage), offload(offload) {
  std::vector<bool> param(spec.buffers.size(), false);
  for (const ParamSpec &ps : spec.params) {
    param[size_t(ps.buffer)] = true;
    for (int g : ps.grads)
      param[size_t(g)] = true;
  }
  for (size_t i = 0; i < spec.buffers.size(); ++i)
    if (!param[i] && spec.buffers[i].elements > 0)
      buffers.push_back(int(i));
}

template <typename Fn>
void ActivationStash::forEach(Frame &global, std::vector<Frame> &layers, Fn fn) {
  for (int b : buffers) {
    if (!spec.buffers[size_t(b)].layer) {
      fn(global, b);
      continue;
    }
    for (Frame &layer : layers)
      fn(layer, b);
  }
}

void ActivationStash::save(int mb, Frame &global, std::vector<Frame> &layers) {
  if (saved.count(mb))
    abortJob("the schedule runs the forward of micro-batch " + std::to_string(mb) + " twice");
  Saved &s = saved[mb];
  forEach(global, layers, [&](Frame &f, int b) {
    const size_t n = size_t(spec.buffers[size_t(b)].elements);
    if (spec.buffers[size_t(b)].kind == BufferKind::Ids) {
      s.ids.emplace_back().swap(f.idVec(b));
      f.idVec(b).assign(n, 0);
      return;
    }
    std::vector<float> &kept = s.floats.emplace_back();
    kept.swap(f.vec(b));
    // A checkpointed layer's released buffers stay released.
    f.vec(b).assign(kept.empty() ? 0 : n, 0.f);
    offload.swapOut(kept, s.hosts.emplace_back(), spec.offloadActivations);
  });
}

void ActivationStash::restore(int mb, Frame &global, std::vector<Frame> &layers) {
  auto it = saved.find(mb);
  if (it == saved.end())
    abortJob("the schedule runs the backward of micro-batch " + std::to_string(mb) +
             " before its forward");
  Saved &s = it->second;
  size_t nextFloat = 0, nextIds = 0;
  forEach(global, layers, [&](Frame &f, int b) {
    if (spec.buffers[size_t(b)].kind == BufferKind::Ids) {
      f.idVec(b).swap(s.ids[nextIds++]);
      return;
    }
    std::vector<float> &kept = s.floats[nextFloat];
    offload.swapIn(kept, s.hosts[nextFloat++]);
    f.vec(b).swap(kept);
  });
  saved.erase(it);
}

} // namespace mist::rt
