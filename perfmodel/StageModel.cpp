//===- StageModel.cpp - Memory and time of a pipeline stage ---------------===//
#include "perfmodel/StageModel.h"

#include <algorithm>
#include <cmath>
#include <tuple>

using namespace mist;

InterferenceTable::InterferenceTable(const Cluster &c) {
  for (auto &row : factor)
    for (double &f : row)
      f = 1.0;
  for (const InterferenceEntry &e : c.interference) {
    unsigned mask = 0;
    for (Stream s : e.streams)
      mask |= 1u << static_cast<unsigned>(s);
    for (size_t i = 0; i < e.streams.size() && i < e.factors.size(); ++i)
      factor[mask][static_cast<unsigned>(e.streams[i])] = std::max(1.0, e.factors[i]);
  }
}

double InterferenceTable::overlap(const double load[numStreams]) const {
  // Progressive model: while several streams are busy each runs slower by
  // its factor for that set; when the shortest finishes, continue with the
  // rest.
  double left[numStreams];
  unsigned mask = 0;
  for (unsigned s = 0; s < numStreams; ++s) {
    left[s] = load[s];
    if (left[s] > 0)
      mask |= 1u << s;
  }
  double total = 0;
  while (mask) {
    double step = INFINITY;
    for (unsigned s = 0; s < numStreams; ++s)
      if (mask & (1u << s))
        step = std::min(step, left[s] * factor[mask][s]);
    total += step;
    unsigned next = 0;
    for (unsigned s = 0; s < numStreams; ++s)
      if (mask & (1u << s)) {
        left[s] -= step / factor[mask][s];
        if (left[s] > 1e-15 * step)
          next |= 1u << s;
      }
    mask = next;
  }
  return total;
}

namespace {

double transferSeconds(double bytes, double gbs, double latencyUs) {
  return bytes > 0 && gbs > 0 ? bytes / (gbs * 1e9) + latencyUs * 1e-6 : 0;
}

/// Optimizer state bytes per parameter: Adam's moments, plus masters unless
/// the weights are the masters. Those stay the masters only while whole on
/// the rank: once ZeRO slices the optimizer state or the weights are
/// offloaded, the trainer keeps master slices beside them.
double optimizerBytesPerParam(const StageKnobs &k, const RegionNumbers &L) {
  const bool separateMasters =
      L.mastersAreWeights && ((k.zero.optimizer && k.dp > 1) || k.offload.weights > 0);
  return L.stateBytes + (separateMasters ? L.paramBytes : 0);
}

/// AdamW on `params` parameters of the stage, sharded as its knobs say.
double optimizerSeconds(double params, const StageKnobs &k, const StageConstants &sc) {
  return params / (k.zero.optimizer ? k.dp : 1) * sc.adamSecondsPerParam;
}

/// Zeroing the gradient sums of `params` parameters before the step's
/// micro-batches accumulate into them (the trainer's memset at the start of
/// each step, like Megatron-LM's zero_grad_buffer): the rank's slice under
/// ZeRO-2, the part kept on the device when gradients are offloaded.
double clearGradSeconds(double params, const StageKnobs &k, const StageConstants &sc) {
  return params / (k.zero.grads ? k.dp : 1) * (1 - k.offload.grads) * sc.clearGradSecondsPerParam;
}

/// Gradients folded region by region (ZeRO-2's reduce-scatter into the
/// rank's slice, an offloaded sum) are written, micro-batch by micro-batch,
/// into a region's buffers made zeroed before its backward: a memset of the
/// region's whole gradients (`params` parameters) in each backward.
double foldedGradClearSeconds(double params, const StageKnobs &k, const StageConstants &sc) {
  const bool folded = (k.zero.grads && k.dp > 1) || k.offload.grads > 0;
  return folded ? params * sc.clearGradSecondsPerParam : 0;
}

/// Pre's or post's backward kernels and the zeroing of its folded gradients;
/// pre's leave out a weight post ties to it (GPT's embedding), whose
/// gradients are summed whole, not folded region by region.
double edgeBackwardSeconds(bool pre, const StageKnobs &k, const StageConstants &sc) {
  const RegionNumbers &r = pre ? sc.numbers.pre : sc.numbers.post;
  const double folded = pre ? std::max(0.0, r.params - sc.numbers.post.tiedParams) : r.params;
  return r.bwdCompute + foldedGradClearSeconds(folded, k, sc);
}

/// The parameters of the stage's pre and post regions (a last stage's
/// post includes its own copy of a tied head).
double preParams(const StageKnobs &k, const StageConstants &sc) {
  return k.first ? sc.numbers.pre.params : 0;
}
double postParams(const StageKnobs &k, const StageConstants &sc) {
  return k.last ? sc.numbers.post.params + (k.first ? 0 : sc.numbers.post.tiedParams) : 0;
}

/// AdamW on the stage's pre and post weights (the embeddings, the final
/// norm, a tied head's copy on the last stage), which the trainer steps at
/// the start of the first forward as it steps each layer's before its
/// forward: GPT-3 1.3B's 107 M embedding parameters, 1.2 ms on an H100.
double edgeOptimizerSeconds(const StageKnobs &k, const StageConstants &sc) {
  const double params = preParams(k, sc) + postParams(k, sc);
  return optimizerSeconds(params, k, sc) + clearGradSeconds(params, k, sc);
}

/// What a layer that is not checkpointed keeps for its backward: all it
/// saves, or under selective recomputation all but what it computes again.
double savedNotCheckpointed(const RegionNumbers &L, const StageKnobs &k) {
  return k.selectiveRecompute ? L.savedSelective : L.savedFull;
}

/// Loads of one layer in one phase: the cost of each of the layer's steps
/// in the schedule, summed per stream (host copies as bytes, moved in one
/// transfer per stream); `ckpt` layers recompute their forward.
PhaseLoad layerLoad(Phase ph, bool ckpt, const StageKnobs &k, const StageConstants &sc) {
  const RegionNumbers &L = sc.numbers.layer;
  const OffloadRatios &o = k.offload;
  double shardW = k.zero.weights ? k.dp : 1, shardG = k.zero.grads ? k.dp : 1,
         shardO = k.zero.optimizer ? k.dp : 1;
  double W = L.paramBytes * L.params, Gr = L.gradBytes * L.params,
         O = optimizerBytesPerParam(k, L) * L.params;
  double saved = ckpt ? L.savedCkpt : savedNotCheckpointed(L, k);
  PhaseLoad p;
  double &C = p.busy[0], &G = p.busy[1];
  double hBytes = 0, dBytes = 0;
  for (StepKind step : layerSteps(ph, ckpt, k)) {
    switch (step) {
    case StepKind::FetchOptimizerState:
      hBytes += o.optimizer * O / shardO + o.grads * Gr / shardG;
      break;
    case StepKind::OptimizerStep: // overlapped with compute
      C += optimizerSeconds(L.params, k, sc) + clearGradSeconds(L.params, k, sc);
      break;
    case StepKind::WriteBackOptimizerState:
      dBytes += o.optimizer * O / shardO + o.weights * W / shardW;
      break;
    case StepKind::GatherUpdatedWeights:
    case StepKind::GatherWeights:
      G += sc.gatherWeights;
      p.gather += sc.gatherWeights;
      break;
    case StepKind::FetchWeights:
      hBytes += o.weights * W / shardW;
      break;
    case StepKind::Forward:
    case StepKind::Recompute:
      C += L.fwdCompute;
      p.tp += L.tpFwd;
      p.tpGemm += L.gemmFwd;
      break;
    case StepKind::SwapOutActivations:
      dBytes += o.activations * saved;
      break;
    case StepKind::SwapInActivations:
      hBytes += o.activations * saved;
      break;
    case StepKind::Backward: // after selective recomputation's forward ops, where it runs
      C += L.bwdCompute + (k.selectiveRecompute && !ckpt ? L.selectiveRecompute : 0) +
           foldedGradClearSeconds(L.params, k, sc);
      p.tp += L.tpBwd;
      p.tpGemm += L.gemmBwd;
      p.tpBeside += L.tpBwdBesideGemm;
      break;
    case StepKind::FetchGradientAccumulators:
      hBytes += o.grads * Gr / shardG;
      break;
    case StepKind::WriteBackGradients:
      dBytes += o.grads * Gr / shardG;
      break;
    case StepKind::ReduceScatterGradients:
    case StepKind::AllReduceGradients:
      (ph == Phase::LastBackward && !k.overlapGradReduce ? p.reduceAfter : G) +=
          step == StepKind::AllReduceGradients ? sc.reduceGrads : sc.scatterGrads;
      break;
    default: // the stage's own steps: phaseElapsed and stagePhase price them
      break;
    }
  }
  p.busy[2] = transferSeconds(hBytes, sc.h2dGBs, sc.hostLatencyUs);
  p.busy[3] = transferSeconds(dBytes, sc.d2hGBs, sc.hostLatencyUs);
  return p;
}

/// Wall time of a phase of the whole stage from its per-layer times. In a
/// run of n layers, layer i computes while layer i+1's inputs are fetched
/// (weight gathers, host copies in) and layer i-1's outputs drained
/// (gradient reductions, host copies out): the first layer's fetch and the
/// last layer's drain have nothing to hide behind, and the end slots have
/// only one neighbour's transfers beside their compute. So the run takes
///   fetch + firstSlot + (n-2) slots + lastSlot + drain,
/// each of its layers' transfers counted once. Then pre/post on the end
/// stages.
double phaseElapsed(Phase ph, const StageKnobs &k, const StageConstants &sc, const LayerTimes &lt) {
  const unsigned p = static_cast<unsigned>(ph);
  const int full = k.layers - k.ckpt;
  const unsigned e = full == 0 ? 1 : 0; // the end layers' kind
  const PhaseLoad &edge = lt.load[p][e];
  const double fetch = std::max(edge.gather, edge.busy[2]);
  const double drain = std::max(edge.busy[1] - edge.gather, edge.busy[3]);
  // Reductions held until the backward ends run one after another.
  double elapsed = fetch + drain + (k.layers - k.ckpt) * lt.load[p][0].reduceAfter +
                   k.ckpt * lt.load[p][1].reduceAfter;
  if (k.layers == 1)
    elapsed += edge.busy[0] + edge.tp; // nothing beside its compute
  else
    elapsed += full * lt.elapsed[p][0] + k.ckpt * lt.elapsed[p][1] - 2 * lt.elapsed[p][e] +
               lt.firstSlot[p][e] + lt.lastSlot[p][e];
  bool fwd = ph == Phase::Forward || ph == Phase::FirstForward;
  bool last = ph == Phase::LastBackward; // pre/post gradient reduction, exposed
  if (ph == Phase::FirstForward)
    elapsed += edgeOptimizerSeconds(k, sc);
  const RegionNumbers &pre = sc.numbers.pre, &post = sc.numbers.post;
  // (pre's and post's re-gathers under sequence parallelism, beside their
  // GEMMs, add what their GEMMs do not hide)
  auto besides = [](const RegionNumbers &r) {
    return std::max(0.0, r.tpBwdBesideGemm - r.gemmBwd);
  };
  if (k.first)
    elapsed += fwd ? pre.fwdCompute + pre.tpFwd
                   : edgeBackwardSeconds(true, k, sc) + pre.tpBwd + besides(pre) +
                         (last ? sc.reducePre : 0);
  if (k.last)
    elapsed += fwd ? post.fwdCompute + post.tpFwd
                   : edgeBackwardSeconds(false, k, sc) + post.tpBwd + besides(post) +
                         (last ? sc.reducePost : 0);
  return elapsed;
}

/// The same phase with each stream's busy time, for reports and traces.
PhaseLoad stagePhase(Phase ph, const StageKnobs &k, const StageConstants &sc,
                     const LayerTimes &lt) {
  const unsigned p = static_cast<unsigned>(ph);
  PhaseLoad total;
  total.elapsed = phaseElapsed(ph, k, sc, lt);
  int counts[2] = {k.layers - k.ckpt, k.ckpt};
  for (unsigned ckpt = 0; ckpt < 2; ++ckpt) {
    const PhaseLoad &l = lt.load[p][ckpt];
    total.tp += counts[ckpt] * l.tp;
    total.gather += counts[ckpt] * l.gather;
    total.reduceAfter += counts[ckpt] * l.reduceAfter;
    total.busy[1] += counts[ckpt] * l.reduceAfter;
    for (unsigned s = 0; s < numStreams; ++s)
      total.busy[s] += counts[ckpt] * l.busy[s];
  }
  bool fwd = ph == Phase::Forward || ph == Phase::FirstForward;
  if (ph == Phase::FirstForward)
    total.busy[0] += edgeOptimizerSeconds(k, sc);
  for (auto [runs, r, reduce, isPre] :
       {std::tuple{k.first, &sc.numbers.pre, sc.reducePre, true},
        std::tuple{k.last, &sc.numbers.post, sc.reducePost, false}}) {
    if (!runs)
      continue;
    total.busy[0] += fwd ? r->fwdCompute : edgeBackwardSeconds(isPre, k, sc);
    total.tp += fwd ? r->tpFwd : r->tpBwd + std::max(0.0, r->tpBwdBesideGemm - r->gemmBwd);
    if (ph == Phase::LastBackward)
      total.busy[1] += reduce;
  }
  return total;
}

/// t and d from the stable and the first+last micro-batch times.
void splitTimes(double stable, double edges, int gradAccum, double &t, double &d) {
  if (gradAccum == 1) { // the only micro-batch is both first and last
    t = edges;
    d = 0;
  } else {
    t = stable;
    d = edges - stable;
  }
}

/// Weights, gradients, optimizer state and their gather/staging buffers.
MemoryBreakdown statesOf(const StageKnobs &k, const StageNumbers &n) {
  const RegionNumbers &L = n.layer;
  const OffloadRatios &o = k.offload;
  double shardW = k.zero.weights ? k.dp : 1, shardG = k.zero.grads ? k.dp : 1,
         shardO = k.zero.optimizer ? k.dp : 1;
  // A pipeline's last stage holds its own copy of a weight post shares with
  // pre (the tied embedding); one stage holds it once.
  double post = n.post.params + (k.first ? 0 : n.post.tiedParams);
  double P = k.layers * L.params + (k.first ? n.pre.params : 0) + (k.last ? post : 0);
  MemoryBreakdown m;
  // per parameter: weights, gradients, optimizer state
  const double wb = L.paramBytes, gb = L.gradBytes, sb = optimizerBytesPerParam(k, L);
  m.weights = wb * P / shardW * (1 - o.weights);
  m.grads = gb * P / shardG * (1 - o.grads);
  m.optimizer = sb * P / shardO * (1 - o.optimizer);
  // Sharded or offloaded layers are gathered into a double buffer (the
  // layer in use and the one being prefetched); the offloaded part of the
  // optimizer state is staged one parameter group (a layer, pre or post) at
  // a time for its step, in a buffer the size of the largest.
  if (k.zero.weights || o.weights > 0)
    m.buffers += 2 * wb * L.params;
  // The largest parameter group (a layer, pre or post): one region's
  // gradients or staged optimizer state at a time.
  const double largestGroup =
      std::max({k.layers > 0 ? L.params : 0.0, k.first ? n.pre.params : 0.0, k.last ? post : 0.0});
  // Gradients folded region by region (ZeRO-2's reduce-scatter, or into the
  // offloaded sum) hold whole buffers for the region being computed and the
  // one being folded: a layer beside the largest group (pre's or post's
  // embedding is larger than a layer in small models).
  if (k.zero.grads || o.grads > 0)
    m.buffers += gb * (L.params + largestGroup);
  if (o.optimizer > 0)
    m.buffers += o.optimizer * sb * largestGroup / shardO;
  m.host = wb * P / shardW * o.weights + gb * P / shardG * o.grads + sb * P / shardO * o.optimizer;
  return m;
}

/// Adds the activations of the in-flight micro-batches and the working set
/// of the layer being computed to the state memory.
MemoryBreakdown withActivations(const StageKnobs &k, const StageNumbers &n, MemoryBreakdown m) {
  const RegionNumbers &L = n.layer;
  const OffloadRatios &o = k.offload;
  int full = k.layers - k.ckpt;
  const double savedFull = savedNotCheckpointed(L, k); // of a layer not checkpointed
  double perMicroBatch = full * savedFull + k.ckpt * L.savedCkpt + (k.first ? n.pre.savedFull : 0);
  double keep = 1 - o.activations;
  double waiting = std::max(0, k.inflight - 1) * perMicroBatch * keep;
  // The run under way: everything before its last layer, kept (or being
  // swapped out through a one-layer staging buffer), plus the last layer's
  // working set; the last stage then runs the head and the loss.
  int runLayers = k.layers;
  if (k.chunks > 1) {
    // Interleaved: the waiting chunk-runs hold a chunk's layers each (the
    // stage's share), the waiting micro-batches of the first stage their
    // embeddings; the run under way is one chunk's.
    const double chunkSaved = (full * savedFull + k.ckpt * L.savedCkpt) / k.chunks;
    waiting = (std::max(0, k.chunksInFlight - 1) * chunkSaved +
               std::max(0, k.inflight - 1) * (k.first ? n.pre.savedFull : 0)) *
              keep;
    runLayers = k.layers / k.chunks;
    full = std::min(full, runLayers); // the last chunk holds the checkpointed layers
  }
  int fullBefore = std::min(runLayers - 1, full), ckptBefore = runLayers - 1 - fullBefore;
  double before =
      ((k.first ? n.pre.savedFull : 0) + fullBefore * savedFull + ckptBefore * L.savedCkpt) * keep +
      (o.activations > 0 ? o.activations * (fullBefore > 0 ? savedFull : L.savedCkpt) : 0);
  bool lastCkpt = k.ckpt > 0;
  double fwdWork = lastCkpt               ? L.fwdPeakCkpt
                   : k.selectiveRecompute ? L.fwdPeakSelective
                                          : L.fwdPeakFull;
  // A checkpointed layer's recompute keeps everything until its backward.
  double bwdWork = std::max(L.bwdPeak, lastCkpt ? L.fwdPeakFull + L.gradIn : 0.0);
  if (k.last) {
    double lastSaved = lastCkpt ? L.savedCkpt : savedFull;
    double head = lastSaved + std::max(n.post.fwdPeakFull, n.post.bwdPeak);
    fwdWork = std::max(fwdWork, head);
  }
  double states = m.weights + m.grads + m.optimizer + m.buffers;
  m.perInflight = perMicroBatch * keep;
  // The offloaded share of the same activations waits in pinned host memory.
  m.hostPerInflight = perMicroBatch * o.activations;
  m.host += std::max(0, k.inflight - 1) * m.hostPerInflight +
            ((k.first ? n.pre.savedFull : 0) + fullBefore * savedFull + ckptBefore * L.savedCkpt) *
                o.activations;
  m.savedActivations = waiting + before;
  m.transient = std::max(fwdWork, bwdWork);
  m.fwdPeak = states + waiting + before + fwdWork;
  m.bwdPeak = states + waiting + before + bwdWork;
  return m;
}

} // namespace

StageConstants mist::makeStageConstants(const StageKnobs &ctx, const StageNumbers &n,
                                        const Cluster &c) {
  StageConstants sc;
  sc.numbers = n;
  // The dp group: tp fills a node first, dp takes what is left of the mesh.
  auto dpSeconds = [&](double bytes, Collective kind) {
    if (ctx.dp <= 1)
      return 0.0;
    int gpn = std::max(1, ctx.meshGpusPerNode / std::max(1, ctx.tp));
    int nodes = std::max(1, ctx.dp / gpn);
    return collectiveSeconds(c, kind, bytes, nodes, std::min(gpn, ctx.dp));
  };
  const double layerWeights = n.layer.paramBytes * n.layer.params;
  const double layerGrads = n.layer.gradBytes * n.layer.params;
  sc.gatherWeights = dpSeconds(layerWeights, Collective::AllGather);
  sc.scatterGrads = dpSeconds(layerGrads, Collective::ReduceScatter);
  sc.reduceGrads = dpSeconds(layerGrads, Collective::AllReduce);
  // A weight tied across a pipeline's end stages (GPT's embedding) is not
  // reduced over dp with the rest: the ranks of both stages holding a part
  // sum it in one all-reduce over both stages' dp ranks: within the node on a
  // one-node cluster, else taken as spanning two nodes (the pipeline's ends).
  const bool pipelineEnd = ctx.first != ctx.last;
  const double tiedBytes = pipelineEnd ? n.post.gradBytes * n.post.tiedParams : 0;
  const int tiedNodes = c.nodes > 1 ? 2 : 1;
  const double tiedSum = tiedBytes > 0 ? collectiveSeconds(c, Collective::AllReduce, tiedBytes,
                                                           tiedNodes, 2 * ctx.dp / tiedNodes)
                                       : 0;
  sc.reducePre = dpSeconds(n.pre.gradBytes * n.pre.params - (ctx.first ? tiedBytes : 0),
                           Collective::AllReduce) +
                 (ctx.first ? tiedSum : 0);
  sc.reducePost =
      dpSeconds(n.post.gradBytes * n.post.params, Collective::AllReduce) + (ctx.last ? tiedSum : 0);
  double mem = c.device.memBandwidthGBs * 1e9 * c.device.memEfficiency;
  // The step first reads every gradient for the global norm it clips by
  // (Trainer.cpp), then Adam reads and writes m, v and the masters, reads the
  // gradient again, and writes the weights when they are a separate copy
  // (bf16: 34 bytes; fp32: 32).
  const RegionNumbers &L = n.layer;
  const double masters = L.stateBytes + (L.mastersAreWeights ? L.paramBytes : 0);
  const double adamBytesPerParam =
      2 * masters + 2 * L.gradBytes + (L.mastersAreWeights ? 0 : L.paramBytes);
  sc.adamSecondsPerParam = mem > 0 ? adamBytesPerParam / mem : 0;
  sc.clearGradSecondsPerParam = mem > 0 ? L.gradBytes / mem : 0;
  // Every GPU of a node runs the same schedule, so host copies overlap in
  // time: those sharing a host link share its bandwidth.
  sc.h2dGBs = c.sharedH2dGBs();
  sc.d2hGBs = c.sharedD2hGBs();
  sc.hostLatencyUs = c.hostLatencyUs;
  sc.usableBytes = c.usableBytes();
  sc.hostBytes = c.hostBytesPerGpu();
  return sc;
}

LayerTimes mist::layerTimes(const StageKnobs &k, const StageConstants &sc,
                            const InterferenceTable &interference) {
  LayerTimes lt;
  for (unsigned p = 0; p < 4; ++p)
    for (unsigned ckpt = 0; ckpt < 2; ++ckpt) {
      PhaseLoad l = layerLoad(static_cast<Phase>(p), ckpt, k, sc);
      if (k.tpCommOverlap) {
        l.tp += l.tpBeside; // overlapped below with the rest
      } else if (l.tpBeside > 0) {
        const double beside[numStreams] = {l.tpGemm, l.tpBeside, 0, 0};
        l.tp += std::max(0.0, interference.overlap(beside) - l.tpGemm);
      }
      if (k.tpCommOverlap && l.tp > 0 && k.tp > 1) {
        // Megatron-LM's --tp-comm-overlap splits each collective and its
        // neighbouring GEMM into tp chunks, one per peer, and pipelines
        // them: one chunk's transfer has no GEMM chunk beside it, the rest
        // run beside the GEMM's other chunks, as the interference model
        // gives for compute and g2g busy together. The rest of the layer's
        // compute waits for the collectives' results.
        const double share = 1.0 - 1.0 / k.tp;
        const double beside[numStreams] = {share * l.tpGemm, share * l.tp, 0, 0};
        l.tp = l.tp / k.tp + std::max(0.0, interference.overlap(beside) - share * l.tpGemm);
      }
      lt.load[p][ckpt] = l;
      lt.elapsed[p][ckpt] = interference.overlap(l.busy) + l.tp;
      const double fetchBeside[numStreams] = {l.busy[0], l.gather, l.busy[2], 0};
      const double drainBeside[numStreams] = {l.busy[0], l.busy[1] - l.gather, 0, l.busy[3]};
      lt.firstSlot[p][ckpt] = interference.overlap(fetchBeside) + l.tp;
      lt.lastSlot[p][ckpt] = interference.overlap(drainBeside) + l.tp;
    }
  lt.states = statesOf(k, sc.numbers);
  return lt;
}

StageEstimate mist::estimateStage(const StageKnobs &k, const StageConstants &sc,
                                  const LayerTimes &lt) {
  StageEstimate e;
  e.fwdStable = stagePhase(Phase::Forward, k, sc, lt);
  e.bwdStable = stagePhase(Phase::Backward, k, sc, lt);
  e.fwdFirst = stagePhase(Phase::FirstForward, k, sc, lt);
  e.bwdLast = stagePhase(Phase::LastBackward, k, sc, lt);
  splitTimes(e.fwdStable.elapsed + e.bwdStable.elapsed, e.fwdFirst.elapsed + e.bwdLast.elapsed,
             k.gradAccum, e.t, e.d);
  e.mem = withActivations(k, sc.numbers, lt.states);
  e.fits = fitsIn(e.mem, sc);
  const StageNumbers &n = sc.numbers;
  RegionTimes &r = e.regions;
  r.layerFwd = n.layer.fwdCompute;
  r.layerBwd = n.layer.bwdCompute + (k.selectiveRecompute ? n.layer.selectiveRecompute : 0);
  r.layerOptimizer = optimizerSeconds(n.layer.params, k, sc);
  if (k.first) {
    r.preFwd = n.pre.fwdCompute;
    r.preBwd = n.pre.bwdCompute;
    r.preOptimizer = optimizerSeconds(preParams(k, sc), k, sc);
  }
  if (k.last) {
    r.postFwd = n.post.fwdCompute;
    r.postBwd = n.post.bwdCompute;
    r.postOptimizer = optimizerSeconds(postParams(k, sc), k, sc);
  }
  return e;
}

MemoryBreakdown mist::stageStateMemory(const StageKnobs &k, const StageNumbers &n) {
  return statesOf(k, n);
}

MemoryBreakdown mist::stageMemory(const StageKnobs &k, const StageNumbers &n,
                                  const MemoryBreakdown &states) {
  return withActivations(k, n, states);
}

void mist::stageTimes(const StageKnobs &k, const StageConstants &sc, const LayerTimes &lt,
                      double &t, double &d) {
  splitTimes(phaseElapsed(Phase::Forward, k, sc, lt) + phaseElapsed(Phase::Backward, k, sc, lt),
             phaseElapsed(Phase::FirstForward, k, sc, lt) +
                 phaseElapsed(Phase::LastBackward, k, sc, lt),
             k.gradAccum, t, d);
}

StageScore mist::scoreStage(const StageKnobs &k, const StageConstants &sc, const LayerTimes &lt) {
  StageScore r;
  stageTimes(k, sc, lt, r.t, r.d);
  MemoryBreakdown m = withActivations(k, sc.numbers, lt.states);
  r.peakBytes = m.peak();
  r.perInflightBytes = m.perInflight;
  r.hostBytes = m.host;
  r.hostPerInflightBytes = m.hostPerInflight;
  r.fits = fitsIn(m, sc);
  return r;
}

StageEstimate mist::estimateStage(const StageKnobs &k, const StageConstants &sc,
                                  const InterferenceTable &interference) {
  return estimateStage(k, sc, layerTimes(k, sc, interference));
}

StageEstimate mist::estimateStage(const StageKnobs &k, const StageNumbers &n, const Cluster &c,
                                  const InterferenceTable &interference) {
  return estimateStage(k, makeStageConstants(k, n, c), interference);
}

double mist::pipelineSeconds(const std::vector<double> &t, const std::vector<double> &d, int G,
                             int v) {
  const double fill = 1.0 / std::max(1, v); // the share of a stage's t in the fill and drain
  double sum = 0, maxT = 0, maxD = -INFINITY, before = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    sum += t[i];
    maxT = std::max(maxT, t[i]);
    maxD = std::max(maxD, d[i] - before);
    before += t[i] * fill;
  }
  return sum * fill + (G - fill) * maxT + std::max(0.0, maxD);
}

int mist::inflightChunks(int i, int S, int G, int v) {
  return std::min((S - i - 1) * 2 + (v - 1) * S + 1, G * v);
}

int mist::inflightMicroBatches(int i, int S, int G, int v) {
  if (v <= 1)
    return std::min(S - i, G);
  return (inflightChunks(i, S, G, v) + v - 1) / v;
}

namespace {

/// Stage i of the plan, its p2p included; `firstGpu[i]` is where stage i's
/// GPUs start (stages sit on consecutive GPUs).
StageEstimate estimatePlannedStage(const Plan &plan, int i, const ModelProfile &model,
                                   const Cluster &cluster, const InterferenceTable &interference,
                                   const std::vector<int> &firstGpu) {
  const int S = static_cast<int>(plan.stages.size());
  const StagePlan &st = plan.stages[i];
  StageKnobs k;
  static_cast<ScheduleKnobs &>(k) = scheduleKnobs(plan, i);
  k.microBatch = st.microBatch;
  k.meshNodes = st.meshNodes;
  k.meshGpusPerNode = st.meshGpusPerNode;
  k.inflight = inflightMicroBatches(i, S, plan.gradAccum, plan.virtualStages);
  k.chunksInFlight = inflightChunks(i, S, plan.gradAccum, std::max(1, plan.virtualStages));
  k.sequenceParallel = plan.sequenceParallel;
  k.selectiveRecompute = plan.selectiveRecompute;
  k.tpCommOverlap = plan.tpCommOverlap;
  k.overlapGradReduce = plan.overlapGradReduce;
  const bool sp = plan.sequenceParallel;
  StageNumbers n{model.evaluate(RegionKind::Layer, st.microBatch, st.tp, cluster, sp),
                 model.evaluate(RegionKind::Pre, st.microBatch, st.tp, cluster, sp),
                 model.evaluate(RegionKind::Post, st.microBatch, st.tp, cluster, sp)};
  StageEstimate e = estimateStage(k, n, cluster, interference);
  // Activations go to the next stage and gradients come back, once per
  // micro-batch each way; interleaved, once per chunk, and the stages form a
  // ring (the last stage's chunk feeds the first stage's next one).
  const int v = plan.virtualStages;
  const int next = i + 1 < S ? i + 1 : (v > 1 ? 0 : -1),
            prev = i > 0 ? i - 1 : (v > 1 ? S - 1 : -1);
  if (next >= 0)
    e.p2p += v * p2pSeconds(cluster,
                            p2pCrossesNodes(cluster, firstGpu[i], firstGpu[next],
                                            std::min(st.gpus(), plan.stages[next].gpus())),
                            n.layer.output);
  if (prev >= 0)
    e.p2p += v * p2pSeconds(cluster,
                            p2pCrossesNodes(cluster, firstGpu[prev], firstGpu[i],
                                            std::min(st.gpus(), plan.stages[prev].gpus())),
                            n.layer.gradIn);
  e.t += e.p2p;
  return e;
}

} // namespace

std::optional<PlanProblem> mist::planProblem(const Plan &plan, const ModelProfile &model,
                                             const Cluster &cluster) {
  const int S = static_cast<int>(plan.stages.size());
  if (S == 0)
    return PlanProblem{-1, "stages", "it has no stages"};
  if (plan.gradAccum < 1)
    return PlanProblem{-1, "grad_accum", "grad_accum must be at least 1"};
  int expectFirst = 0, gpus = 0;
  for (int i = 0; i < S; ++i) {
    const StagePlan &st = plan.stages[i];
    auto bad = [&](const char *key, const std::string &what) {
      return PlanProblem{i, key, "stage " + std::to_string(i) + ": " + what};
    };
    if (st.firstLayer != expectFirst || st.lastLayer < st.firstLayer)
      return bad("layers", "layers must continue at " + std::to_string(expectFirst));
    expectFirst = st.lastLayer + 1;
    if (st.ckptLayers < 0 || st.ckptLayers > st.layers())
      return bad("ckpt_layers", "ckpt_layers must be between 0 and the stage's layer count");
    if (st.dp * st.tp != st.gpus())
      return bad("mesh", "dp x tp = " + std::to_string(st.dp * st.tp) + " but the mesh has " +
                             std::to_string(st.gpus()) + " GPUs");
    if (int64_t(st.microBatch) * st.dp * plan.gradAccum != plan.globalBatch)
      return bad("micro_batch",
                 "micro_batch x dp x grad_accum = " +
                     std::to_string(int64_t(st.microBatch) * st.dp * plan.gradAccum) +
                     " but the global batch is " + std::to_string(plan.globalBatch));
    if (st.meshGpusPerNode > cluster.gpusPerNode || st.meshNodes > cluster.nodes)
      return bad("mesh", "its mesh does not fit the cluster's nodes");
    if (st.tp > st.meshGpusPerNode && !cluster.tpAcrossNodes)
      return bad("tp", "tp = " + std::to_string(st.tp) +
                           " spans nodes, which the cluster does not allow");
    if (auto broken = model.violatedAssumption(st.tp))
      return bad("tp",
                 "tp = " + std::to_string(st.tp) + " breaks the model's assumption " + *broken);
    gpus += st.gpus();
  }
  if (const int v = plan.virtualStages; v > 1) {
    if (S < 2)
      return PlanProblem{-1, "virtual_stages", "virtual_stages needs at least two stages"};
    for (int i = 0; i < S; ++i)
      if (plan.stages[i].layers() % v != 0)
        return PlanProblem{i, "layers",
                           "stage " + std::to_string(i) + ": interleaved 1F1B (virtual_stages " +
                               std::to_string(v) +
                               ") needs every stage's layer count divisible "
                               "by " +
                               std::to_string(v) + " (it has " +
                               std::to_string(plan.stages[i].layers()) + ")"};
    if (plan.gradAccum % S != 0)
      return PlanProblem{-1, "grad_accum",
                         "interleaved 1F1B needs grad_accum divisible by the " + std::to_string(S) +
                             " stages (as Megatron-LM does)"};
  }
  if (plan.tpCommOverlap && !plan.sequenceParallel)
    return PlanProblem{-1, "tp_comm_overlap",
                       "tp_comm_overlap needs sequence_parallel (as in Megatron-LM)"};
  if (plan.sequenceParallel)
    for (int i = 0; i < S; ++i)
      if (model.seqLen % plan.stages[i].tp != 0)
        return PlanProblem{i, "tp",
                           "stage " + std::to_string(i) + ": sequence parallelism splits the " +
                               std::to_string(model.seqLen) + " tokens of a sequence over tp " +
                               std::to_string(plan.stages[i].tp) +
                               ", which does not divide them (Megatron-LM's rule)"};
  if (expectFirst != model.numLayers) {
    PlanProblem p{S - 1, "layers",
                  "the stages cover " + std::to_string(expectFirst) + " layers but the model has " +
                      std::to_string(model.numLayers)};
    p.aboutModelLayers = true;
    return p;
  }
  if (gpus > cluster.totalGpus())
    return PlanProblem{-1, "stages",
                       "it uses " + std::to_string(gpus) + " GPUs but the cluster has " +
                           std::to_string(cluster.totalGpus())};
  return std::nullopt;
}

std::optional<PipelineEstimate> mist::estimatePlan(const Plan &plan, const ModelProfile &model,
                                                   const Cluster &cluster, DiagnosticEngine &diag) {
  if (std::optional<PlanProblem> bad = planProblem(plan, model, cluster)) {
    diag.error({}, "plan: " + bad->message);
    return std::nullopt;
  }
  const int S = static_cast<int>(plan.stages.size());
  InterferenceTable interference(cluster);
  std::vector<int> firstGpu(S + 1, 0); // stages sit on consecutive GPUs
  for (int i = 0; i < S; ++i)
    firstGpu[i + 1] = firstGpu[i] + plan.stages[i].gpus();
  const int gpus = firstGpu[S];
  PipelineEstimate pe;
  std::vector<double> t, d;
  pe.fits = true;
  for (int i = 0; i < S; ++i) {
    StageEstimate e = estimatePlannedStage(plan, i, model, cluster, interference, firstGpu);
    pe.fits &= e.fits;
    t.push_back(e.t);
    d.push_back(e.d);
    pe.stages.push_back(e);
  }
  pe.iterationSeconds = pipelineSeconds(t, d, plan.gradAccum, plan.virtualStages);
  if (pe.iterationSeconds > 0) {
    pe.tokensPerSecond = double(plan.globalBatch) * model.seqLen / pe.iterationSeconds;
    pe.tflopsPerGpu =
        model.modelFlopsPerSample * plan.globalBatch / pe.iterationSeconds / gpus / 1e12;
  }
  return pe;
}
