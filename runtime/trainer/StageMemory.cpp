//===- StageMemory.cpp - Where every buffer of a stage lives --------------===//
#include "runtime/trainer/StageMemory.h"

#include "runtime/comm/MpiCommunicator.h"
#include <algorithm>
#include <cstddef>
#include <optional>

namespace mist::rt {

namespace {
size_t elementBytes(const BufferSpec &b) {
  return b.kind == BufferKind::Ids ? sizeof(int32_t) : bytesOf(b.dtype);
}
} // namespace

StageMemory::StageMemory(const StageSpec &stage, int slots)
    : spec(stage), globalFrame(stage.buffers.size()),
      layerFrames(size_t(stage.layers), Frame(stage.buffers.size())) {
  roles.assign(spec.buffers.size(), BufferRole::Scratch);
  for (size_t b = 0; b < spec.buffers.size(); ++b)
    if (spec.buffers[b].forward && spec.buffers[b].saved)
      roles[b] = BufferRole::Saved;
  aliasOf.assign(spec.buffers.size(), -1);
  for (const ParamSpec &ps : spec.params) {
    roles[size_t(ps.buffer)] = BufferRole::Parameter;
    for (int g : ps.grads) {
      roles[size_t(g)] = BufferRole::Parameter;
      if (g != ps.grads[0] &&
          spec.buffers[size_t(g)].layer == spec.buffers[size_t(ps.grads[0])].layer)
        aliasOf[size_t(g)] = ps.grads[0];
    }
  }
  recomputedMask.assign(spec.buffers.size(), false);
  for (size_t b = 0; b < spec.buffers.size(); ++b)
    if (spec.buffers[b].layer && roles[b] == BufferRole::Saved &&
        spec.buffers[b].kind == BufferKind::Float && int(b) != spec.layerIn &&
        spec.buffers[b].elements > 0) {
      recomputedBuffers.push_back(int(b));
      recomputedMask[b] = true;
    }
  selectiveMask.assign(spec.buffers.size(), false);
  for (int b : spec.selectiveBuffers)
    if (b >= 0 && size_t(b) < spec.buffers.size())
      selectiveMask[size_t(b)] = true;
  parameters = makeArrays(BufferRole::Parameter, true);
  placeLayerGradients();
  scratch = makeArrays(BufferRole::Scratch, true);
  bind(parameters, BufferRole::Parameter);
  bind(scratch, BufferRole::Scratch);
  for (int s = 0; s < slots; ++s)
    slotArrays.push_back(makeArrays(BufferRole::Saved, false));
  // A slot's bytes as its forward fills it (with activation offload the
  // layers' arrays get memory only when their forward begins).
  for (size_t f = 0; f < size_t(spec.layers) + 1; ++f)
    for (size_t b = 0; b < spec.buffers.size(); ++b) {
      const BufferSpec &buf = spec.buffers[b];
      if (roles[b] == BufferRole::Saved && buf.elements > 0 && buf.layer == (f > 0) &&
          aliasOf[b] < 0 && !droppedBetweenPasses(f, b))
        bytesPerSlot += size_t(buf.elements) * elementBytes(buf);
    }
  if (slots > 0)
    bindSlot(0);
}

// A checkpointed layer's recomputed buffers get memory only when its
// forward or recompute runs (StageRunner), so they are not counted in a slot.
StageMemory::Arrays StageMemory::makeArrays(BufferRole role, bool allocateRecomputed) {
  Arrays a;
  const size_t frames = size_t(spec.layers) + 1;
  a.floats.resize(frames);
  a.ids.resize(frames);
  for (size_t f = 0; f < frames; ++f) {
    a.floats[f].reserve(spec.buffers.size());
    for (const BufferSpec &buf : spec.buffers)
      a.floats[f].emplace_back(buf.dtype);
    a.ids[f].resize(spec.buffers.size());
    // Scratch is shared by the layers: frame 1 only.
    if (role == BufferRole::Scratch && f > 1)
      continue;
    for (size_t b = 0; b < spec.buffers.size(); ++b) {
      const BufferSpec &buf = spec.buffers[b];
      if (roles[b] != role || buf.elements <= 0 || buf.layer != (f > 0) || aliasOf[b] >= 0)
        continue;
      if (!allocateRecomputed && droppedBetweenPasses(f, b))
        continue;
      if (role == BufferRole::Parameter && f > 0 && inLayerGradients(b))
        continue; // a view of the layer's gradients (placeLayerGradients)
      // Offloaded activations: a layer's get memory when its forward begins
      // (StageMemory::refillSlot), so the layers not reached take none; so do
      // an interleaved stage's, chunk by chunk (the global frame's with the
      // chunk that runs pre or post): a micro-batch in flight holds only the
      // chunks it has been through.
      if (role == BufferRole::Saved && (spec.chunks > 1 || (f > 0 && spec.offloadActivations > 0)))
        continue;
      // What runs hand on gets memory when a run writes it or the carried
      // array moves in (Frame::allocate in train.cu, StageRunner::handIn).
      if (role == BufferRole::Scratch && handedOn(int(b)))
        continue;
      if (role == BufferRole::Scratch && buf.scratchOffset >= 0) {
        // A slice of its region's arena, pointed at by enter().
        if (buf.scratchRun < 0 || buf.scratchRun > 5 ||
            buf.scratchOffset + buf.elements * int64_t(elementBytes(buf)) >
                spec.scratchBytes[size_t(buf.scratchRun)])
          abortJob(std::string("stage memory: buffer '") + buf.name +
                   "' lies outside its scratch arena (train.cu and the runtime disagree)");
        continue;
      }
      if (buf.kind == BufferKind::Ids)
        a.ids[f][b].assignZeros(size_t(buf.elements));
      else
        a.floats[f][b].assignZeros(size_t(buf.elements));
    }
  }
  return a;
}

bool StageMemory::inLayerGradients(size_t b) const {
  // Summed in place for the whole step (GradientSums): else the buffers
  // come and go region by region and are arrays of their own.
  if (spec.zeroGrads || spec.offloadGrads > 0 || !spec.buffers[b].layer || aliasOf[b] >= 0)
    return false;
  for (const ParamSpec &ps : spec.params)
    if (ps.grads.size() == 1 && ps.grads[0] == int(b))
      return true;
  return false;
}

namespace {
/// Where each gradient starts in its layer's array: aligned for the
/// kernels' vector loads and the GEMM library's preferred alignment.
constexpr size_t gradientAlignment = 256;
size_t aligned(size_t bytes) {
  return (bytes + gradientAlignment - 1) / gradientAlignment * gradientAlignment;
}
} // namespace

void StageMemory::placeLayerGradients() {
  size_t bytes = 0;
  std::optional<DType> type;
  bool uniform = true;
  for (size_t b = 0; b < spec.buffers.size(); ++b)
    if (spec.buffers[b].elements > 0 && inLayerGradients(b)) {
      bytes += aligned(size_t(spec.buffers[b].elements) * elementBytes(spec.buffers[b]));
      uniform &= !type || *type == spec.buffers[b].dtype;
      type = spec.buffers[b].dtype;
    }
  if (bytes == 0)
    return;
  if (!uniform) { // one collective sums one type: arrays of their own
    for (size_t f = 1; f <= size_t(spec.layers); ++f)
      for (size_t b = 0; b < spec.buffers.size(); ++b)
        if (spec.buffers[b].elements > 0 && inLayerGradients(b))
          parameters.floats[f][b].assignZeros(size_t(spec.buffers[b].elements));
    return;
  }
  layerGradients.resize(size_t(spec.layers));
  for (size_t f = 1; f <= size_t(spec.layers); ++f) {
    DeviceArray<std::byte> &all = layerGradients[f - 1];
    all.assignZeros(bytes);
    size_t at = 0;
    for (size_t b = 0; b < spec.buffers.size(); ++b) {
      const BufferSpec &buf = spec.buffers[b];
      if (buf.elements <= 0 || !inLayerGradients(b))
        continue;
      parameters.floats[f][b] =
          DeviceTensor::view(all.data() + at, size_t(buf.elements), buf.dtype);
      at += aligned(size_t(buf.elements) * elementBytes(buf));
    }
    // The padding between them is zero and stays so: the layer's
    // reduction sums the whole array at once.
    layerFrames[f - 1].allGradients =
        DeviceTensor::view(all.data(), bytes / mist::rt::bytesOf(*type), *type);
  }
}

bool StageMemory::handedOn(int b) const {
  for (int carried : {spec.preOut, spec.preGradIn, spec.layerOut, spec.layerGradIn,
                      spec.layerGradOut, spec.postGradOut})
    if (b == carried)
      return true;
  return false;
}

size_t StageMemory::bytesOf(const Arrays &arrays) {
  size_t bytes = 0;
  for (const auto &frame : arrays.floats)
    for (const DeviceTensor &a : frame)
      bytes += a.bytes();
  for (const auto &frame : arrays.ids)
    for (const DeviceArray<int32_t> &a : frame)
      bytes += a.size() * sizeof(int32_t);
  return bytes;
}

size_t StageMemory::scratchBytes() const {
  size_t outside = 0; // scratch buffers with no planned offset
  for (size_t f = 0; f < scratch.floats.size(); ++f)
    for (size_t b = 0; b < spec.buffers.size(); ++b)
      if (spec.buffers[b].scratchOffset < 0)
        outside += scratch.floats[f][b].bytes() + scratch.ids[f][b].size() * sizeof(int32_t);
  return size_t(*std::max_element(spec.scratchBytes.begin(), spec.scratchBytes.end())) + outside;
}

void StageMemory::enter(RegionKind region, bool forward) {
  const int r = 2 * int(region) + (forward ? 0 : 1);
  DeviceArray<std::byte> &arena = arenas[r];
  arena.allocateUninitialized(size_t(spec.scratchBytes[size_t(r)]));
  std::byte *base = arena.data();
  for (size_t b = 0; b < spec.buffers.size(); ++b) {
    const BufferSpec &buf = spec.buffers[b];
    if (roles[b] != BufferRole::Scratch || buf.scratchRun != r || buf.scratchOffset < 0)
      continue;
    std::byte *at = base + buf.scratchOffset;
    const size_t owner = buf.layer ? 1 : 0; // layer scratch is shared: frame 1's arrays
    if (buf.kind == BufferKind::Ids)
      scratch.ids[owner][b] =
          DeviceArray<int32_t>::view(reinterpret_cast<int32_t *>(at), size_t(buf.elements));
    else
      scratch.floats[owner][b] = DeviceTensor::view(at, size_t(buf.elements), buf.dtype);
  }
}

void StageMemory::leave(RegionKind region, bool forward) {
  arenas[2 * int(region) + (forward ? 0 : 1)].clear();
}

void StageMemory::refillSlot(int frame) {
  Arrays &a = slotArrays[size_t(boundSlot)];
  for (size_t f = 0; f < a.floats.size(); ++f)
    for (size_t b = 0; b < spec.buffers.size() && (frame < 0 || int(f) == frame); ++b) {
      const BufferSpec &buf = spec.buffers[b];
      if (roles[b] != BufferRole::Saved || buf.elements <= 0 || buf.layer != (f > 0) ||
          droppedBetweenPasses(f, b))
        continue;
      if (buf.kind == BufferKind::Ids) {
        if (a.ids[f][b].empty())
          a.ids[f][b].allocateUninitialized(size_t(buf.elements));
      } else if (a.floats[f][b].empty()) {
        a.floats[f][b].allocateUninitialized(size_t(buf.elements));
      }
    }
}

void StageMemory::freeLayerSaved(int layer) {
  Arrays &a = slotArrays[size_t(boundSlot)];
  for (size_t b = 0; b < spec.buffers.size(); ++b)
    if (roles[b] == BufferRole::Saved && spec.buffers[b].layer) {
      a.floats[size_t(layer) + 1][b].clear();
      a.ids[size_t(layer) + 1][b].clear();
    }
}

void StageMemory::freeGlobal(size_t b) {
  if (b >= spec.buffers.size() || roles[b] != BufferRole::Saved || spec.buffers[b].layer)
    return;
  Arrays &a = slotArrays[size_t(boundSlot)];
  a.floats[0][b].clear();
  a.ids[0][b].clear();
}

void StageMemory::freeGlobalSaved(const std::vector<int> &buffers) {
  for (int b : buffers)
    freeGlobal(size_t(b));
}

void StageMemory::freeGlobalSaved() {
  for (size_t b = 0; b < spec.buffers.size(); ++b)
    freeGlobal(b);
}

void StageMemory::bind(Arrays &arrays, BufferRole role) {
  for (size_t f = 0; f <= size_t(spec.layers); ++f) {
    Frame &frame = f == 0 ? globalFrame : layerFrames[f - 1];
    const size_t owner = role == BufferRole::Scratch && f > 1 ? 1 : f;
    for (size_t b = 0; b < spec.buffers.size(); ++b) {
      if (roles[b] != role || spec.buffers[b].layer != (f > 0))
        continue;
      const size_t array = aliasOf[b] >= 0 ? size_t(aliasOf[b]) : b;
      if (spec.buffers[b].kind == BufferKind::Ids)
        frame.bindIds(int(b), &arrays.ids[owner][array]);
      else
        frame.bind(int(b), &arrays.floats[owner][array]);
    }
  }
}

void StageMemory::bindSlot(int slot) {
  if (slot < 0 || slot >= slots())
    abortJob("stage memory: no activation slot " + std::to_string(slot));
  boundSlot = slot;
  bind(slotArrays[size_t(slot)], BufferRole::Saved);
}

std::vector<DeviceTensor *> StageMemory::slotFloats(int slot, int frame) {
  std::vector<DeviceTensor *> out;
  Arrays &a = slotArrays[size_t(slot)];
  for (size_t f = 0; f < a.floats.size(); ++f)
    for (size_t b = 0; b < spec.buffers.size() && (frame < 0 || int(f) == frame); ++b)
      if (roles[b] == BufferRole::Saved && spec.buffers[b].layer == (f > 0) &&
          spec.buffers[b].kind == BufferKind::Float && spec.buffers[b].elements > 0)
        out.push_back(&a.floats[f][b]);
  return out;
}

} // namespace mist::rt
