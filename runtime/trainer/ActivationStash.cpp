//===- ActivationStash.cpp - Activations of micro-batches in flight -------===//
#include "runtime/trainer/ActivationStash.h"

#include "runtime/comm/MpiCommunicator.h"
#include <algorithm>
#include <cmath>

namespace mist::rt {

std::vector<int> ActivationStash::checkpointReleased(const StageSpec &stage) {
  std::vector<bool> keep(stage.buffers.size(), false);
  for (const ParamSpec &ps : stage.params) {
    keep[size_t(ps.buffer)] = true;
    for (int g : ps.grads)
      keep[size_t(g)] = true;
  }
  if (stage.layerIn >= 0)
    keep[size_t(stage.layerIn)] = true;
  std::vector<int> released;
  for (size_t i = 0; i < stage.buffers.size(); ++i)
    if (stage.buffers[i].layer && stage.buffers[i].kind == BufferKind::Float && !keep[i] &&
        stage.buffers[i].elements > 0)
      released.push_back(int(i));
  return released;
}

int ActivationStash::maxInFlight(const std::vector<ScheduleEntry> &order) {
  int now = 0, most = 0;
  for (const ScheduleEntry &e : order) {
    now += e.forward ? 1 : -1;
    most = std::max(most, now);
  }
  return most;
}

ActivationStash::ActivationStash(const StageSpec &stage, OffloadEngine &offload, Streams &streams)
    : spec(stage), offload(offload), streams(streams) {
  std::vector<bool> param(spec.buffers.size(), false);
  for (const ParamSpec &ps : spec.params) {
    param[size_t(ps.buffer)] = true;
    for (int g : ps.grads)
      param[size_t(g)] = true;
  }
  std::vector<bool> recomputed(spec.buffers.size(), false);
  for (int b : checkpointReleased(spec))
    recomputed[size_t(b)] = true;
  const int firstCheckpointed = spec.layers - spec.ckptLayers;
  size_t offset = 0;
  auto add = [&](int layer, int b) {
    const BufferSpec &buf = spec.buffers[size_t(b)];
    const size_t n = size_t(buf.elements);
    const bool isIds = buf.kind == BufferKind::Ids;
    const size_t tail =
        isIds ? 0 : std::min(n, size_t(std::floor(double(n) * spec.offloadActivations)));
    entries.push_back({layer, b, n, n - tail, offset, isIds});
    offset += (n - tail) * 4; // float and int32 alike
  };
  for (size_t b = 0; b < spec.buffers.size(); ++b) {
    const BufferSpec &buf = spec.buffers[b];
    if (param[b] || !buf.forward || buf.elements <= 0)
      continue;
    if (!buf.layer) {
      add(-1, int(b));
      continue;
    }
    for (int l = 0; l < spec.layers; ++l)
      if (!(l >= firstCheckpointed && recomputed[b]))
        add(l, int(b));
  }
  arena.emplace(offset, maxInFlight(spec.order), "the activations of the micro-batches in flight");
  hostTails.resize(size_t(arena->slots()));
  for (auto &tails : hostTails)
    tails.resize(entries.size());
}

DeviceArray<float> &ActivationStash::floats(Frame &global, std::vector<Frame> &layers,
                                            const Entry &e) {
  DeviceArray<float> &v =
      e.layer < 0 ? global.vec(e.buffer) : layers[size_t(e.layer)].vec(e.buffer);
  if (v.size() != e.elements)
    abortJob(std::string("activation stash: buffer '") + spec.buffers[size_t(e.buffer)].name +
             "' has " + std::to_string(v.size()) + " elements, expected " +
             std::to_string(e.elements));
  return v;
}

DeviceArray<int32_t> &ActivationStash::ids(Frame &global, std::vector<Frame> &layers,
                                           const Entry &e) {
  DeviceArray<int32_t> &v =
      e.layer < 0 ? global.idVec(e.buffer) : layers[size_t(e.layer)].idVec(e.buffer);
  if (v.size() != e.elements)
    abortJob(std::string("activation stash: buffer '") + spec.buffers[size_t(e.buffer)].name +
             "' has the wrong size");
  return v;
}

void ActivationStash::save(int mb, Frame &global, std::vector<Frame> &layers) {
  if (saved.count(mb))
    abortJob("the schedule runs the forward of micro-batch " + std::to_string(mb) + " twice");
  const int slotIndex = arena->acquire();
  saved[mb] = slotIndex;
  std::byte *slot = arena->at(slotIndex);
  std::vector<HostArray<float>> &tails = hostTails[size_t(slotIndex)];
  const StreamKind stream = spec.offloadActivations > 0 ? StreamKind::D2H : StreamKind::Compute;
  streams.runFenced(stream, "stash activations " + std::to_string(mb), [&] {
    for (size_t i = 0; i < entries.size(); ++i) {
      const Entry &e = entries[i];
      if (e.ids) {
        device::copy(slot + e.offset, ids(global, layers, e).data(), e.kept * 4);
        continue;
      }
      const DeviceArray<float> &v = floats(global, layers, e);
      device::copy(slot + e.offset, v.data(), e.kept * 4);
      if (e.kept < e.elements)
        offload.copyOut(v.data() + e.kept, e.elements - e.kept, tails[i]);
    }
  });
}

void ActivationStash::restore(int mb, Frame &global, std::vector<Frame> &layers) {
  auto it = saved.find(mb);
  if (it == saved.end())
    abortJob("the schedule runs the backward of micro-batch " + std::to_string(mb) +
             " before its forward");
  const int slotIndex = it->second;
  const std::byte *slot = arena->at(slotIndex);
  std::vector<HostArray<float>> &tails = hostTails[size_t(slotIndex)];
  const StreamKind stream = spec.offloadActivations > 0 ? StreamKind::H2D : StreamKind::Compute;
  streams.runFenced(stream, "unstash activations " + std::to_string(mb), [&] {
    for (size_t i = 0; i < entries.size(); ++i) {
      const Entry &e = entries[i];
      if (e.ids) {
        device::copy(ids(global, layers, e).data(), slot + e.offset, e.kept * 4);
        continue;
      }
      DeviceArray<float> &v = floats(global, layers, e);
      device::copy(v.data(), slot + e.offset, e.kept * 4);
      if (e.kept < e.elements)
        offload.copyIn(v.data() + e.kept, tails[i]);
    }
  });
  arena->release(slotIndex);
  saved.erase(it);
}

} // namespace mist::rt
