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

/// Where a layer step is issued relative to the layer's compute: weights
/// that move (and, in the first forward, the update they must carry) and
/// offloaded activations coming back are brought one region ahead, beside
/// the region before; activations going out leave a region behind, beside
/// the layer after next. The rest is issued with the layer.
enum class Placement { Ahead, Own, Behind };

Placement placementOf(StepKind kind, bool bringsWeights) {
  switch (kind) {
  case StepKind::GatherWeights:
  case StepKind::FetchWeights:
  case StepKind::SwapInActivations:
    return Placement::Ahead;
  case StepKind::FetchOptimizerState:
  case StepKind::OptimizerStep:
  case StepKind::WriteBackOptimizerState:
  case StepKind::GatherUpdatedWeights:
    // The gather or fetch ahead must bring the updated weights.
    return bringsWeights ? Placement::Ahead : Placement::Own;
  case StepKind::SwapOutActivations:
    return Placement::Behind;
  default:
    return Placement::Own;
  }
}

/// One layer's steps of a phase, split by where they are issued.
struct PlacedLayer {
  std::vector<StepKind> ahead, own, behind;
};

PlacedLayer placeLayer(Phase phase, bool checkpointed, const ScheduleKnobs &k) {
  const LayerSteps kinds = layerSteps(phase, checkpointed, k);
  const bool bringsWeights = std::any_of(kinds.begin(), kinds.end(), [](StepKind s) {
    return s == StepKind::GatherWeights || s == StepKind::FetchWeights;
  });
  PlacedLayer placed;
  for (StepKind kind : kinds)
    switch (placementOf(kind, bringsWeights)) {
    case Placement::Ahead:
      placed.ahead.push_back(kind);
      break;
    case Placement::Own:
      placed.own.push_back(kind);
      break;
    case Placement::Behind:
      placed.behind.push_back(kind);
      break;
    }
  return placed;
}

/// A phase's steps in the order the trainer issues them (docs/schedule.md,
/// "Issue order"): the regions in their order (the stage's own steps around
/// the layers), each preceded by what the next region brings in, and, in a
/// forward, a layer's swap-out issued when the forward of the layer after
/// next begins (what is left at the end). A backward begins by bringing
/// back its first two layers' activations: post's backward runs beside them.
std::vector<Step> phaseSteps(Phase phase, const ScheduleKnobs &k) {
  std::vector<Step> steps;
  auto add = [&](StepKind kind, int layer) { steps.push_back({kind, layer, {}}); };
  std::vector<PlacedLayer> layers;
  for (int l = 0; l < k.layers; ++l)
    layers.push_back(placeLayer(phase, k.checkpointed(l), k));
  auto addAll = [&](const std::vector<StepKind> &kinds, int layer) {
    for (StepKind kind : kinds)
      add(kind, layer);
  };
  if (isForward(phase)) {
    if (k.first && phase == Phase::FirstForward)
      add(StepKind::PreOptimizerStep, -1);
    if (k.last && phase == Phase::FirstForward)
      add(StepKind::PostOptimizerStep, -1);
    if (k.layers > 0)
      addAll(layers[0].ahead, 0);
    add(k.first ? StepKind::PreForward : StepKind::ReceiveActivations, -1);
    for (int l = 0; l < k.layers; ++l) {
      if (l + 1 < k.layers)
        addAll(layers[size_t(l + 1)].ahead, l + 1);
      if (l >= 2)
        addAll(layers[size_t(l - 2)].behind, l - 2);
      addAll(layers[size_t(l)].own, l);
    }
    add(k.last ? StepKind::PostForward : StepKind::SendActivations, -1);
    for (int l = std::max(0, k.layers - 2); l < k.layers; ++l)
      addAll(layers[size_t(l)].behind, l);
  } else {
    const bool reduce = phase == Phase::LastBackward && k.dp > 1;
    const int top = k.layers - 1;
    if (top >= 0)
      addAll(layers[size_t(top)].ahead, top);
    // The second layer's activations come back with the first's.
    auto isSwapIn = [](StepKind s) { return s == StepKind::SwapInActivations; };
    if (top >= 1)
      for (StepKind kind : layers[size_t(top - 1)].ahead)
        if (isSwapIn(kind))
          add(kind, top - 1);
    add(k.last ? StepKind::PostBackward : StepKind::ReceiveGradients, -1);
    for (int l = top; l >= 0; --l) {
      if (l >= 1)
        for (StepKind kind : layers[size_t(l - 1)].ahead)
          if (!(l == top && isSwapIn(kind))) // issued at the start
            add(kind, l - 1);
      addAll(layers[size_t(l)].own, l);
    }
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
  k.stages = int(plan.stages.size());
  k.chunks = std::max(1, plan.virtualStages);
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
      if (z.optimizer && !z.weights && multiDp)
        add(StepKind::GatherUpdatedWeights);
      // The gathered weights are what goes back to host memory.
      if (o.optimizer > 0 || o.weights > 0)
        add(StepKind::WriteBackOptimizerState);
    }
    if (o.weights > 0)
      add(StepKind::FetchWeights);
    if (z.weights && multiDp)
      add(StepKind::GatherWeights);
    add(StepKind::Forward);
    if (o.activations > 0)
      add(StepKind::SwapOutActivations);
    return s;
  }
  if (o.weights > 0)
    add(StepKind::FetchWeights);
  if (z.weights && multiDp)
    add(StepKind::GatherWeights);
  if (o.activations > 0)
    add(StepKind::SwapInActivations);
  if (checkpointed)
    add(StepKind::Recompute);
  add(StepKind::Backward);
  // ZeRO-2 scatters every backward's gradients into the rank's slice, which
  // is what an offloaded sum then takes; the others reduce the step's sums,
  // complete after the last backward.
  if (multiDp && z.grads)
    add(StepKind::ReduceScatterGradients);
  if (o.grads > 0) {
    if (k.gradAccum > 1)
      add(StepKind::FetchGradientAccumulators);
    add(StepKind::WriteBackGradients);
  }
  if (multiDp && !z.grads && phase == Phase::LastBackward)
    add(z.optimizer ? StepKind::ReduceScatterGradients : StepKind::AllReduceGradients);
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

int mist::interleavedWarmUp(int stage, int stages, int gradAccum, int chunks) {
  if (chunks <= 1)
    return std::min(stages - stage - 1, gradAccum);
  return std::min((stages - stage - 1) * 2 + (chunks - 1) * stages, gradAccum * chunks);
}

std::vector<ScheduledRun> mist::interleavedOneFOneB(int stage, int stages, int gradAccum,
                                                    int chunks) {
  std::vector<ScheduledRun> order;
  if (chunks <= 1) {
    for (auto [mb, forward] : oneFOneB(stage, stages, gradAccum))
      order.push_back({mb, 0, forward});
    return order;
  }
  const int total = gradAccum * chunks, group = stages * chunks;
  auto run = [&](int k, bool forward) {
    const int inGroup = k % group;
    const int chunk = forward ? inGroup / stages : chunks - 1 - inGroup / stages;
    return ScheduledRun{(k / group) * stages + k % stages, chunk, forward};
  };
  const int warm = interleavedWarmUp(stage, stages, gradAccum, chunks);
  int f = 0, b = 0;
  for (; f < warm; ++f)
    order.push_back(run(f, true));
  while (f < total) {
    order.push_back(run(f++, true));
    order.push_back(run(b++, false));
  }
  while (b < total)
    order.push_back(run(b++, false));
  return order;
}

ChunkPlace mist::chunkPlace(const Plan &plan, int stage, int chunk) {
  const StagePlan &sp = plan.stages[size_t(stage)];
  const int v = std::max(1, plan.virtualStages);
  ChunkPlace c;
  if (v == 1) {
    c.firstLayer = sp.firstLayer;
    c.layers = sp.layers();
    return c;
  }
  // Row c of the model holds every stage's chunk c in stage order, each of
  // its stage's layers / v (uneven stages as Megatron-LM places them).
  int row = 0, before = 0;
  for (size_t t = 0; t < plan.stages.size(); ++t) {
    const int perChunk = plan.stages[t].layers() / v;
    row += perChunk;
    if (int(t) < stage)
      before += perChunk;
  }
  c.layers = sp.layers() / v;
  c.stageFirstLayer = chunk * c.layers;
  c.firstLayer = chunk * row + before;
  return c;
}

Phase StageSchedule::phaseOf(size_t k) const {
  const ScheduledRun &r = order[k];
  if (r.forward)
    return r.mb == 0 ? Phase::FirstForward : Phase::Forward;
  return r.mb == knobs.gradAccum - 1 ? Phase::LastBackward : Phase::Backward;
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
  const int S = int(plan.stages.size()), v = std::max(1, plan.virtualStages);
  s.order = interleavedOneFOneB(stage, S, plan.gradAccum, v);
  for (int c = 0; c < v; ++c) {
    ChunkSchedule chunk;
    chunk.place = chunkPlace(plan, stage, c);
    chunk.knobs = s.knobs;
    chunk.knobs.layers = chunk.place.layers;
    // The stage's last ckpt layers: the chunk's share of them.
    const int after = s.knobs.layers - (chunk.place.stageFirstLayer + chunk.place.layers);
    chunk.knobs.ckpt = std::clamp(s.knobs.ckpt - after, 0, chunk.place.layers);
    chunk.knobs.first = s.knobs.first && c == 0;
    chunk.knobs.last = s.knobs.last && c == v - 1;
    for (unsigned p = 0; p < numPhases; ++p)
      chunk.phases[p] = phaseSteps(Phase(p), chunk.knobs);
    s.chunks.push_back(std::move(chunk));
  }
  return s;
}
