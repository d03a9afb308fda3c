//===- Schedule.cpp - What a pipeline stage does, step by step ------------===//
#include "schedule/Schedule.h"

#include <algorithm>

using namespace mist;

const char *mist::phaseName(Phase p) {
  switch (p) {
  case Phase::FirstForward:
    return "first forward (micro-batch 0)";
  case Phase::Forward:
    return "forward (micro-batches 1..G-1)";
  case Phase::Backward:
    return "backward (micro-batches 0..G-2)";
  case Phase::LastBackward:
    return "last backward (micro-batch G-1)";
  }
  return "?";
}

namespace {

struct StepInfo {
  const char *name;
  Stream stream;
};

/// Indexed by StepKind.
constexpr StepInfo stepInfo[numStepKinds] = {
    {"pre-optimizer-step", Stream::Compute},
    {"post-optimizer-step", Stream::Compute},
    {"pre-forward", Stream::Compute},
    {"receive-activations", Stream::G2G},
    {"post-forward", Stream::Compute},
    {"send-activations", Stream::G2G},
    {"post-backward", Stream::Compute},
    {"receive-gradients", Stream::G2G},
    {"pre-backward", Stream::Compute},
    {"send-gradients", Stream::G2G},
    {"reduce-pre-gradients", Stream::G2G},
    {"reduce-post-gradients", Stream::G2G},
    {"fetch-optimizer-state", Stream::H2D},
    {"optimizer-step", Stream::Compute},
    {"write-back-optimizer-state", Stream::D2H},
    {"gather-updated-weights", Stream::G2G},
    {"gather-weights", Stream::G2G},
    {"fetch-weights", Stream::H2D},
    {"forward", Stream::Compute},
    {"swap-out-activations", Stream::D2H},
    {"swap-in-activations", Stream::H2D},
    {"recompute", Stream::Compute},
    {"backward", Stream::Compute},
    {"fetch-gradient-accumulators", Stream::H2D},
    {"write-back-gradients", Stream::D2H},
    {"reduce-scatter-gradients", Stream::G2G},
    {"all-reduce-gradients", Stream::G2G},
};

bool isReceive(StepKind k) {
  return k == StepKind::ReceiveActivations || k == StepKind::ReceiveGradients;
}

/// Fills in what each step of a phase waits for (Step::after): a layer's
/// step waits for the latest earlier step of the same layer on each other
/// stream; the first computation after a received message waits for it; a
/// send waits for the computation before it; the pre/post reductions wait
/// for their region's backward. Order on one stream is implicit.
void linkDependencies(std::vector<Step> &steps) {
  int lastCompute = -1, lastReceive = -1, preBackward = -1, postBackward = -1;
  for (int j = 0; j < int(steps.size()); ++j) {
    Step &s = steps[j];
    const Stream stream = s.stream();
    if (s.layer >= 0)
      for (unsigned other = 0; other < numStreams; ++other) {
        if (other == unsigned(stream))
          continue;
        for (int i = j - 1; i >= 0; --i)
          if (steps[i].layer == s.layer && unsigned(steps[i].stream()) == other) {
            s.after.push_back(i);
            break;
          }
      }
    if (stream == Stream::Compute && lastReceive > lastCompute)
      s.after.push_back(lastReceive);
    if ((s.kind == StepKind::SendActivations || s.kind == StepKind::SendGradients) &&
        lastCompute >= 0)
      s.after.push_back(lastCompute);
    if (s.kind == StepKind::ReducePreGradients && preBackward >= 0)
      s.after.push_back(preBackward);
    if (s.kind == StepKind::ReducePostGradients && postBackward >= 0)
      s.after.push_back(postBackward);
    std::sort(s.after.begin(), s.after.end());
    s.after.erase(std::unique(s.after.begin(), s.after.end()), s.after.end());
    if (stream == Stream::Compute)
      lastCompute = j;
    if (isReceive(s.kind))
      lastReceive = j;
    if (s.kind == StepKind::PreBackward)
      preBackward = j;
    if (s.kind == StepKind::PostBackward)
      postBackward = j;
  }
}

std::vector<Step> phaseSteps(Phase phase, const ScheduleKnobs &k) {
  std::vector<Step> steps;
  auto add = [&](StepKind kind, int layer) { steps.push_back({kind, layer, {}}); };
  auto addLayer = [&](int l) {
    for (StepKind kind : layerSteps(phase, k.checkpointed(l), k))
      add(kind, l);
  };
  if (isForward(phase)) {
    if (k.first && phase == Phase::FirstForward)
      add(StepKind::PreOptimizerStep, -1);
    if (k.last && phase == Phase::FirstForward)
      add(StepKind::PostOptimizerStep, -1);
    add(k.first ? StepKind::PreForward : StepKind::ReceiveActivations, -1);
    for (int l = 0; l < k.layers; ++l)
      addLayer(l);
    add(k.last ? StepKind::PostForward : StepKind::SendActivations, -1);
  } else {
    const bool reduce = phase == Phase::LastBackward && k.dp > 1;
    add(k.last ? StepKind::PostBackward : StepKind::ReceiveGradients, -1);
    for (int l = k.layers - 1; l >= 0; --l)
      addLayer(l);
    if (k.first) {
      add(StepKind::PreBackward, -1);
      if (reduce)
        add(StepKind::ReducePreGradients, -1);
    } else {
      add(StepKind::SendGradients, -1);
    }
    if (k.last && reduce)
      add(StepKind::ReducePostGradients, -1);
  }
  linkDependencies(steps);
  return steps;
}

} // namespace

Stream mist::streamOf(StepKind k) { return stepInfo[unsigned(k)].stream; }

const char *mist::stepName(StepKind k) { return stepInfo[unsigned(k)].name; }

ScheduleKnobs mist::scheduleKnobs(const Plan &plan, int stage) {
  const StagePlan &st = plan.stages[size_t(stage)];
  ScheduleKnobs k;
  k.layers = st.layers();
  k.ckpt = st.ckptLayers;
  k.dp = st.dp;
  k.tp = st.tp;
  k.zero = st.zero;
  k.offload = st.offload;
  k.first = stage == 0;
  k.last = stage + 1 == int(plan.stages.size());
  k.gradAccum = plan.gradAccum;
  return k;
}

LayerSteps mist::layerSteps(Phase phase, bool checkpointed, const ScheduleKnobs &k) {
  LayerSteps s;
  auto add = [&](StepKind kind) { s.kinds[s.count++] = kind; };
  const OffloadRatios &o = k.offload;
  const ZeroFlags &z = k.zero;
  const bool multiDp = k.dp > 1;
  if (isForward(phase)) {
    if (phase == Phase::FirstForward) {
      // Last iteration's optimizer step, layer by layer, hidden behind this forward.
      if (o.optimizer > 0 || o.grads > 0)
        add(StepKind::FetchOptimizerState);
      add(StepKind::OptimizerStep);
      if (o.optimizer > 0 || o.weights > 0)
        add(StepKind::WriteBackOptimizerState);
      if (z.optimizer && !z.weights && multiDp)
        add(StepKind::GatherUpdatedWeights);
    }
    if (z.weights && multiDp)
      add(StepKind::GatherWeights);
    if (o.weights > 0)
      add(StepKind::FetchWeights);
    add(StepKind::Forward);
    if (o.activations > 0)
      add(StepKind::SwapOutActivations);
    return s;
  }
  if (z.weights && multiDp)
    add(StepKind::GatherWeights);
  if (o.weights > 0)
    add(StepKind::FetchWeights);
  if (o.activations > 0)
    add(StepKind::SwapInActivations);
  if (checkpointed)
    add(StepKind::Recompute);
  add(StepKind::Backward);
  if (o.grads > 0) {
    if (k.gradAccum > 1)
      add(StepKind::FetchGradientAccumulators);
    add(StepKind::WriteBackGradients);
  }
  if (multiDp) {
    if (phase == Phase::LastBackward)
      add(z.grads || z.optimizer ? StepKind::ReduceScatterGradients : StepKind::AllReduceGradients);
    else if (z.grads)
      add(StepKind::ReduceScatterGradients);
  }
  return s;
}

std::vector<std::pair<int, bool>> mist::oneFOneB(int stage, int stages, int gradAccum) {
  std::vector<std::pair<int, bool>> order;
  int warm = std::min(stages - stage - 1, gradAccum), f = 0, b = 0;
  for (; f < warm; ++f)
    order.push_back({f, true});
  while (f < gradAccum) {
    order.push_back({f++, true});
    order.push_back({b++, false});
  }
  while (b < gradAccum)
    order.push_back({b++, false});
  return order;
}

Phase StageSchedule::phaseOf(size_t k) const {
  auto [mb, forward] = order[k];
  if (forward)
    return mb == 0 ? Phase::FirstForward : Phase::Forward;
  return mb == knobs.gradAccum - 1 ? Phase::LastBackward : Phase::Backward;
}

bool StageSchedule::runs(Phase p) const {
  for (size_t k = 0; k < order.size(); ++k)
    if (phaseOf(k) == p)
      return true;
  return false;
}

StageSchedule mist::buildStageSchedule(const Plan &plan, int stage) {
  StageSchedule s;
  s.stage = stage;
  s.knobs = scheduleKnobs(plan, stage);
  s.order = oneFOneB(stage, int(plan.stages.size()), plan.gradAccum);
  for (unsigned p = 0; p < numPhases; ++p)
    s.phases[p] = phaseSteps(Phase(p), s.knobs);
  return s;
}
