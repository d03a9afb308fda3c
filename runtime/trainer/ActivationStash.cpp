//===- ActivationStash.cpp - Activations of micro-batches in flight -------===//
#include "runtime/trainer/ActivationStash.h"

#include "runtime/comm/MpiCommunicator.h"
#include <algorithm>

namespace mist::rt {

int ActivationStash::maxInFlight(const std::vector<ScheduledRun> &order) {
  int now = 0, most = 0;
  for (const ScheduledRun &r : order)
    if (r.chunk == 0) { // a micro-batch's first forward and last backward
      now += r.forward ? 1 : -1;
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

int ActivationStash::slotFor(int mb, int chunk) {
  if (chunk > 0) { // a later chunk of a micro-batch in flight: its slot
    auto it = slotOf.find(mb);
    if (it == slotOf.end())
      abortJob("the schedule runs the forward of micro-batch " + std::to_string(mb) +
               " through chunk " + std::to_string(chunk) + " before chunk 0's");
    return it->second;
  }
  if (slotOf.count(mb))
    abortJob("the schedule runs the forward of micro-batch " + std::to_string(mb) + " twice");
  if (freeSlots.empty())
    abortJob("the activations of the micro-batches in flight: all " +
             std::to_string(memory.slots()) +
             " slots are taken; the schedule keeps more in flight than the plan reserved for");
  const int slot = freeSlots.back();
  freeSlots.pop_back();
  slotOf[mb] = slot;
  return slot;
}

void ActivationStash::begin(int mb, int chunk) {
  memory.bindSlot(slotFor(mb, chunk));
  // What the last backward from this slot freed. Without offload or chunks
  // all of it at once; with activation offload each layer's comes back when
  // its forward begins (prepareLayer), so the layers the forward has not
  // reached take no memory; an interleaved stage's come back chunk by chunk
  // (the global frame's with the chunk that runs pre or post).
  if (spec.offloadActivations <= 0 && spec.chunks == 1) {
    memory.refillSlot(-1);
    return;
  }
  if (chunk == globalChunk())
    memory.refillSlot(0);
  if (spec.offloadActivations <= 0)
    for (int l = chunkFirstLayer(chunk); l < chunkFirstLayer(chunk) + chunkLayers(); ++l)
      memory.refillSlot(1 + l);
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
                std::to_string(spec.globalLayer(layer)));
}

void ActivationStash::save(int mb, int chunk) {
  auto it = slotOf.find(mb);
  if (it == slotOf.end())
    abortJob("the schedule stashes micro-batch " + std::to_string(mb) + " before its forward");
  for (int l = chunkFirstLayer(chunk); l < chunkFirstLayer(chunk) + chunkLayers(); ++l)
    saveLayer(mb, l); // the ones not sent during the forward
  if (chunk == globalChunk())
    moveFrame(it->second, 0, /*out=*/true, "stash activations " + std::to_string(mb));
}

void ActivationStash::restore(int mb, int chunk) {
  auto it = slotOf.find(mb);
  if (it == slotOf.end())
    abortJob("the schedule runs the backward of micro-batch " + std::to_string(mb) +
             " before its forward");
  const int slot = it->second;
  memory.bindSlot(slot);
  // The layers' come back by the schedule's swap-in steps (restoreLayer).
  if (chunk == globalChunk())
    moveFrame(slot, 0, /*out=*/false, "unstash activations " + std::to_string(mb));
  backwardSlot = slot;
  // After its last backward (chunk 0's) later forwards run after this one
  // (the order is per rank), so the slot can be handed out again; its other
  // layers come back one by one.
  if (chunk == 0) {
    slotOf.erase(it);
    freeSlots.push_back(slot);
  }
}

void ActivationStash::restoreLayer(int layer) {
  if (backwardSlot < 0)
    abortJob("a layer's activations were asked for outside a backward");
  moveFrame(backwardSlot, 1 + layer, /*out=*/false,
            "unstash activations layer " + std::to_string(spec.globalLayer(layer)));
}

} // namespace mist::rt
