//===- ActivationStash.cpp - Activations of micro-batches in flight -------===//
#include "runtime/trainer/ActivationStash.h"

#include "runtime/comm/MpiCommunicator.h"
#include <algorithm>

namespace mist::rt {

int ActivationStash::maxInFlight(const std::vector<std::pair<int, bool>> &order) {
  int now = 0, most = 0;
  for (auto [mb, forward] : order) {
    now += forward ? 1 : -1;
    most = std::max(most, now);
  }
  return most;
}

ActivationStash::ActivationStash(const StageSpec &stage, StageMemory &memory,
                                 OffloadEngine &offload, Streams &streams)
    : spec(stage), memory(memory), offload(offload), streams(streams) {
  for (int s = memory.slots() - 1; s >= 0; --s)
    freeSlots.push_back(s);
  hostTails.resize(size_t(memory.slots()));
  for (int s = 0; s < memory.slots(); ++s) {
    hostTails[size_t(s)].resize(size_t(stage.layers) + 1);
    for (int f = 0; f <= stage.layers; ++f)
      hostTails[size_t(s)][size_t(f)].resize(memory.slotFloats(s, f).size());
  }
}

void ActivationStash::begin(int mb) {
  if (slotOf.count(mb))
    abortJob("the schedule runs the forward of micro-batch " + std::to_string(mb) + " twice");
  if (freeSlots.empty())
    abortJob("the activations of the micro-batches in flight: all " +
             std::to_string(memory.slots()) +
             " slots are taken; the schedule keeps more in flight than the plan reserved for");
  const int slot = freeSlots.back();
  freeSlots.pop_back();
  slotOf[mb] = slot;
  memory.bindSlot(slot);
  // What the last backward from this slot freed; with activation offload
  // each layer's comes back when its forward begins (prepareLayer), so the
  // layers the forward has not reached take no memory.
  memory.refillSlot(spec.offloadActivations > 0 ? 0 : -1);
}

void ActivationStash::prepareLayer(int layer) {
  if (spec.offloadActivations > 0)
    memory.refillSlot(1 + layer);
}

void ActivationStash::moveFrame(int slot, int frame, bool out, const std::string &what) {
  if (spec.offloadActivations <= 0)
    return; // the slot holds them until the backward
  std::vector<DeviceTensor *> arrays = memory.slotFloats(slot, frame);
  std::vector<HostBytes> &tails = hostTails[size_t(slot)][size_t(frame)];
  bool any = false; // out: something still resident; in: something held
  for (size_t k = 0; k < arrays.size(); ++k)
    any |= out ? tails[k].empty() && !arrays[k]->empty() : !tails[k].empty();
  if (!any)
    return;
  streams.runFenced(out ? StreamKind::D2H : StreamKind::H2D, what, [&] {
    for (size_t k = 0; k < arrays.size(); ++k) {
      if (!out)
        offload.swapIn(*arrays[k], tails[k]);
      else if (tails[k].empty())
        offload.swapOut(*arrays[k], tails[k], spec.offloadActivations);
    }
  });
}

void ActivationStash::saveLayer(int mb, int layer) {
  auto it = slotOf.find(mb);
  if (it == slotOf.end())
    abortJob("the schedule stashes micro-batch " + std::to_string(mb) + " before its forward");
  moveFrame(it->second, 1 + layer, /*out=*/true,
            "stash activations " + std::to_string(mb) + " layer " +
                std::to_string(spec.firstLayer + layer));
}

void ActivationStash::save(int mb) {
  auto it = slotOf.find(mb);
  if (it == slotOf.end())
    abortJob("the schedule stashes micro-batch " + std::to_string(mb) + " before its forward");
  for (int l = 0; l < spec.layers; ++l)
    saveLayer(mb, l); // the ones not sent during the forward
  moveFrame(it->second, 0, /*out=*/true, "stash activations " + std::to_string(mb));
}

void ActivationStash::restore(int mb) {
  auto it = slotOf.find(mb);
  if (it == slotOf.end())
    abortJob("the schedule runs the backward of micro-batch " + std::to_string(mb) +
             " before its forward");
  const int slot = it->second;
  memory.bindSlot(slot);
  // The layers' come back by the schedule's swap-in steps (restoreLayer).
  moveFrame(slot, 0, /*out=*/false, "unstash activations " + std::to_string(mb));
  // Later forwards run after this backward (the order is per rank), so the
  // slot can be handed out again; its other layers come back one by one.
  backwardSlot = slot;
  slotOf.erase(it);
  freeSlots.push_back(slot);
}

void ActivationStash::restoreLayer(int layer) {
  if (backwardSlot < 0)
    abortJob("a layer's activations were asked for outside a backward");
  moveFrame(backwardSlot, 1 + layer, /*out=*/false,
            "unstash activations layer " + std::to_string(spec.firstLayer + layer));
}

} // namespace mist::rt
