//===- Evaluator.cpp - Scoring many strategies of one stage context -------===//
#include "perfmodel/Evaluator.h"

#include <cmath>

using namespace mist;

StageEvaluator::StageEvaluator(const ModelProfile &model, const Cluster &cluster,
                               const StageContext &ctx)
    : StageEvaluator(StageNumbers{model.evaluate(RegionKind::Layer, ctx.microBatch, ctx.tp, cluster,
                                                 ctx.sequenceParallel),
                                  model.evaluate(RegionKind::Pre, ctx.microBatch, ctx.tp, cluster,
                                                 ctx.sequenceParallel),
                                  model.evaluate(RegionKind::Post, ctx.microBatch, ctx.tp, cluster,
                                                 ctx.sequenceParallel)},
                     cluster, ctx) {}

StageEvaluator::StageEvaluator(const StageNumbers &n, const Cluster &cluster,
                               const StageContext &ctx)
    : interference(cluster) {
  base.layers = ctx.layers;
  base.microBatch = ctx.microBatch;
  base.dp = ctx.dp;
  base.tp = ctx.tp;
  base.meshNodes = ctx.meshNodes;
  base.meshGpusPerNode = ctx.meshGpusPerNode;
  base.first = ctx.first;
  base.last = ctx.last;
  base.inflight = ctx.inflight;
  base.gradAccum = ctx.gradAccum;
  base.sequenceParallel = ctx.sequenceParallel;
  base.tpCommOverlap = ctx.tpCommOverlap;
  base.selectiveRecompute = ctx.selectiveRecompute;
  constants = makeStageConstants(base, n, cluster);
}

namespace {
bool sameGroup(const ZeroFlags &za, const OffloadRatios &oa, const ZeroFlags &zb,
               const OffloadRatios &ob) {
  return za.weights == zb.weights && za.grads == zb.grads && za.optimizer == zb.optimizer &&
         oa.weights == ob.weights && oa.grads == ob.grads && oa.optimizer == ob.optimizer &&
         oa.activations == ob.activations;
}
} // namespace

void StrategyBatch::add(ZeroFlags z, OffloadRatios o, int ckpt) {
  if (items.empty() || !sameGroup(z, o, items.back().zero, items.back().offload))
    groupStarts.push_back(items.size());
  items.push_back({z, o, ckpt});
}

void StageEvaluator::evaluate(const StrategyBatch &batch, std::vector<StrategyResult> &out,
                              bool timesOfFitsOnly) const {
  StageKnobs k = base;
  for (size_t g = 0, groups = batch.numGroups(); g < groups; ++g) {
    const size_t begin = batch.groupStart(g), end = batch.groupStart(g + 1);
    k.zero = batch[begin].zero;
    k.offload = batch[begin].offload;
    // Strategies that differ only in the checkpoint count share the state
    // memory and the per-layer times.
    MemoryBreakdown states = stageStateMemory(k, constants.numbers);
    LayerTimes lt;
    bool haveTimes = false;
    for (size_t i = begin; i < end; ++i) {
      k.ckpt = batch[i].ckpt;
      MemoryBreakdown m = stageMemory(k, constants.numbers, states);
      StrategyResult &r = out[i];
      r.peakBytes = m.peak();
      r.perInflightBytes = m.perInflight;
      r.hostBytes = m.host;
      r.hostPerInflightBytes = m.hostPerInflight;
      r.fits = fitsIn(m, constants);
      if (!r.fits && timesOfFitsOnly) {
        r.t = r.d = INFINITY;
        continue;
      }
      if (!haveTimes) {
        lt = layerTimes(k, constants, interference);
        haveTimes = true;
      }
      stageTimes(k, constants, lt, r.t, r.d);
    }
  }
}
