//===- Evaluator.cpp - Scoring many strategies of one stage context -------===//
#include "passes/perf/Evaluator.h"

using namespace mist;

StageEvaluator::StageEvaluator(const ModelProfile &model, const Cluster &cluster,
                               const StageContext &ctx)
    : StageEvaluator(StageNumbers{model.evaluate(RegionKind::Layer, ctx.microBatch, ctx.tp, cluster),
                                  model.evaluate(RegionKind::Pre, ctx.microBatch, ctx.tp, cluster),
                                  model.evaluate(RegionKind::Post, ctx.microBatch, ctx.tp, cluster)},
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
  constants = makeStageConstants(base, n, cluster);
}

void StageEvaluator::evaluate(const StrategyBatch &batch, std::vector<StrategyResult> &out) const {
  StageKnobs k = base;
  LayerTimes lt;
  bool have = false;
  for (size_t i = 0, n = batch.size(); i < n; ++i) {
    const StrategyBatch::Item &s = batch[i];
    // Strategies that differ only in the checkpoint count share layer times.
    bool same = have && s.zero.weights == k.zero.weights && s.zero.grads == k.zero.grads &&
                s.zero.optimizer == k.zero.optimizer && s.offload.weights == k.offload.weights &&
                s.offload.grads == k.offload.grads && s.offload.optimizer == k.offload.optimizer &&
                s.offload.activations == k.offload.activations;
    k.zero = s.zero;
    k.offload = s.offload;
    k.ckpt = s.ckpt;
    if (!same) {
      lt = layerTimes(k, constants, interference);
      have = true;
    }
    StageScore sc = scoreStage(k, constants, lt);
    out[i] = {sc.t, sc.d, sc.peakBytes, sc.fits};
  }
}
