//===- OptimizerUpdate.cpp - AdamW, region by region ------------------------===//
#include "runtime/trainer/OptimizerUpdate.h"

#include "runtime/comm/MpiCommunicator.h"
#include "runtime/ops/Ops.h"
#include <algorithm>

namespace mist::rt {

OptimizerUpdate::OptimizerUpdate(ParameterTable &table, GradientSums &gradients)
    : ParameterView(table), gradients(gradients) {}

void OptimizerUpdate::deferStep(const AdamStep &adam) {
  if (pendingStep)
    abortJob("an optimizer step was deferred before the last one ran");
  pendingStep = adam;
  updated.assign(regionCount(), Event{});
  pending.assign(regionCount(), 0);
  for (size_t p = 0; p < state.size(); ++p)
    for (size_t l = 0; l < state[p].size(); ++l) {
      state[p][l].updateDue = true;
      pending[slot(regionOf(p, l))] = 1;
    }
}

// A region's update is the schedule's four steps (docs/schedule.md): the
// offloaded optimizer state comes in (h2d), AdamW runs (compute), the new
// weights are all-gathered from the ZeRO-1/2 slices (g2g) and the offloaded
// state and weights go back out (d2h). Each runs when the emitted schedule
// calls it; a region whose weights are used before its update is done ends
// the job (StageRunner::requireUpdated); a region without a pending update
// has nothing to do.
OptimizerUpdate::RegionUpdate *OptimizerUpdate::updateOf(StageRegion region) {
  auto under = updates.find(slot(region));
  if (under != updates.end())
    return under->second.get();
  const size_t g = slot(region);
  if (!pendingStep || g >= pending.size() || !pending[g])
    return nullptr;
  pending[g] = 0;
  auto u = std::make_shared<RegionUpdate>();
  u->region = region;
  u->members = membersOf(region);
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
  updates[g] = u;
  return u.get();
}

void OptimizerUpdate::fetchOptimizerState(StageRegion region) {
  RegionUpdate *u = updateOf(region);
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
  // The offloaded tails of the region's masters and moments come into one
  // staging buffer each (members one after the other), are stepped there,
  // and go back; the device parts are stepped in place. The buffers are
  // free once the last region's write-back has copied them out.
  if (stagingFree.recorded())
    streams.wait(StreamKind::H2D, stagingFree);
  streams.runFenced(StreamKind::H2D, "swap in optimizer state " + regionName(region), [&] {
    for (size_t i = 0; i < u->members.size(); ++i) {
      State &s = state[u->members[i].first][u->members[i].second];
      if (!s.masterIsWeights)
        offload.stageIn(stagedMaster.at(u->stagedAt[i]).data, s.masterHost);
      offload.stageIn(stagedM.at(u->stagedAt[i]).data, s.mHost);
      offload.stageIn(stagedV.at(u->stagedAt[i]).data, s.vHost);
    }
  });
}

void OptimizerUpdate::optimizerStep(StageRegion region, bool stepUnderWay) {
  RegionUpdate *u = updateOf(region);
  if (!u || u->stepped)
    return;
  fetchOptimizerState(region); // when the schedule has no step of its own for it
  u->stepped = true;
  const AdamStep a = *pendingStep;
  if (!u->members.empty())
    streams.run(StreamKind::Compute, "optimizer step " + regionName(region), [&] {
      // In place, the region's tensors go to one adamWMany (on GPUs a few
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
      gradients.zeroSums(p, l);
  finishIfDone(*u);
}

bool OptimizerUpdate::needsGather(const RegionUpdate &u) const {
  return !u.inPlace && sliced && !weightsSliced;
}

bool OptimizerUpdate::needsWriteBack(const RegionUpdate &u) const {
  return u.staged > 0 || (!u.inPlace && spec.offloadWeights > 0);
}

void OptimizerUpdate::gatherUpdatedWeights(StageRegion region) {
  auto under = updates.find(slot(region));
  if (under == updates.end() || !under->second->stepped || under->second->gathered)
    return;
  std::shared_ptr<RegionUpdate> u = under->second;
  u->gathered = true;
  if (!needsGather(*u))
    return;
  // The weights kept in host memory come in whole for the gather and go
  // back out with the write-back.
  for (size_t i = 0; i < u->members.size(); ++i)
    u->resident[i] = state[u->members[i].first][u->members[i].second].resident;
  streams.wait(StreamKind::G2G, u->last);
  streams.run(StreamKind::G2G, "all-gather updated weights " + regionName(region), [this, u] {
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

void OptimizerUpdate::writeBackOptimizerState(StageRegion region) {
  auto under = updates.find(slot(region));
  if (under == updates.end() || !under->second->stepped || under->second->written)
    return;
  std::shared_ptr<RegionUpdate> u = under->second;
  gatherUpdatedWeights(region); // the gathered weights are what goes out
  u->written = true;
  if (!needsWriteBack(*u)) {
    finishIfDone(*u);
    return;
  }
  streams.wait(StreamKind::D2H, u->last);
  streams.run(StreamKind::D2H, "swap out optimizer state " + regionName(region), [this, u] {
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
  if (u->staged > 0)
    stagingFree = u->last;
  finishIfDone(*u);
}

void OptimizerUpdate::finishIfDone(RegionUpdate &u) {
  if (!u.stepped || (needsGather(u) && !u.gathered) || (needsWriteBack(u) && !u.written))
    return;
  updated[slot(u.region)] = u.last;
  updates.erase(slot(u.region)); // `u` is gone after this
  if (updates.empty() && std::none_of(pending.begin(), pending.end(), [](char c) { return c; }))
    finishDeferred();
}

bool OptimizerUpdate::applyPendingStep(StageRegion region, bool stepUnderWay) {
  if (!updateOf(region))
    return false;
  fetchOptimizerState(region);
  optimizerStep(region, stepUnderWay);
  gatherUpdatedWeights(region);
  writeBackOptimizerState(region);
  return true;
}

bool OptimizerUpdate::updateDue(StageRegion region) const {
  const size_t g = slot(region);
  return updates.count(slot(region)) || (pendingStep && g < pending.size() && pending[g]);
}

void OptimizerUpdate::finishDeferred() {
  for (size_t p = 0; p < state.size(); ++p)
    for (size_t l = 0; l < state[p].size(); ++l)
      if (state[p][l].updateDue)
        abortJob(std::string("the schedule's optimizer step left out ") + spec.params[p].name +
                 " (copy " + std::to_string(l) + ")");
  pendingStep.reset();
}

void OptimizerUpdate::reserveStaging() {
  std::vector<size_t> stagedPerRegion(regionCount(), 0);
  for (size_t p = 0; p < state.size(); ++p)
    for (size_t l = 0; l < state[p].size(); ++l)
      stagedPerRegion[slot(regionOf(p, l))] += state[p][l].mHost.size() / sizeof(float);
  const size_t most = *std::max_element(stagedPerRegion.begin(), stagedPerRegion.end());
  if (most > 0) {
    stagedM.assignZeros(most);
    stagedV.assignZeros(most);
    if (!state.empty() && !state[0].empty() && !state[0][0].masterIsWeights)
      stagedMaster.assignZeros(most);
  }
}

} // namespace mist::rt
