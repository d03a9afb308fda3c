//===- StageModel.cpp - Memory and time of a pipeline stage ---------------===//
#include "passes/perf/StageModel.h"

#include <algorithm>
#include <cmath>

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

constexpr double bf16Bytes = 2, stateBytes = 12; // fp32 master weights + Adam m and v
constexpr double adamBytesPerParam = 28;         // read master/m/v/grad, write master/m/v/weight

struct Transfers {
  const Cluster &c;
  double dpSeconds(double bytes, const StageKnobs &k, double factor) const {
    if (k.dp <= 1)
      return 0;
    int gpn = std::max(1, k.meshGpusPerNode / std::max(1, k.tp));
    int nodes = std::max(1, k.dp / gpn);
    return collectiveSeconds(c, bytes, nodes, std::min(gpn, k.dp), factor);
  }
  double h2d(double bytes) const {
    return bytes > 0 && c.h2dGBs > 0 ? bytes / (c.h2dGBs * 1e9) + c.hostLatencyUs * 1e-6 : 0;
  }
  double d2h(double bytes) const {
    return bytes > 0 && c.d2hGBs > 0 ? bytes / (c.d2hGBs * 1e9) + c.hostLatencyUs * 1e-6 : 0;
  }
};

enum class Phase { FwdStable, FwdFirst, BwdStable, BwdLast };

/// Loads of one layer in one phase; `ckpt` layers recompute their forward.
PhaseLoad layerLoad(Phase ph, bool ckpt, const StageKnobs &k, const RegionNumbers &L,
                    const Cluster &c, const Transfers &x) {
  const OffloadRatios &o = k.offload;
  double shardW = k.zero.weights ? k.dp : 1, shardG = k.zero.grads ? k.dp : 1,
         shardO = k.zero.optimizer ? k.dp : 1;
  double W = bf16Bytes * L.params, Gr = bf16Bytes * L.params, O = stateBytes * L.params;
  double saved = ckpt ? L.savedCkpt : L.savedFull;
  bool fwd = ph == Phase::FwdStable || ph == Phase::FwdFirst;
  PhaseLoad p;
  double &C = p.busy[0], &G = p.busy[1], &H = p.busy[2], &D = p.busy[3];
  double hBytes = o.weights * W / shardW, dBytes = 0;
  if (fwd) {
    C = L.fwdCompute;
    p.tp = L.tpFwd;
    dBytes += o.activations * saved;
    if (k.zero.weights || (ph == Phase::FwdFirst && k.zero.optimizer))
      G += x.dpSeconds(W, k, 1);
    if (ph == Phase::FwdFirst) {
      // The optimizer step of this layer runs here, overlapped with compute.
      double mem = c.device.memBandwidthGBs * 1e9 * c.device.memEfficiency;
      C += mem > 0 ? L.params / shardO * adamBytesPerParam / mem : 0;
      hBytes += o.optimizer * O / shardO + o.grads * Gr / shardG;
      dBytes += o.optimizer * O / shardO + o.weights * W / shardW;
    }
  } else {
    C = L.bwdCompute + (ckpt ? L.fwdCompute : 0);
    p.tp = L.tpBwd + (ckpt ? L.tpFwd : 0);
    hBytes += o.activations * saved + (k.gradAccum > 1 ? o.grads * Gr / shardG : 0);
    dBytes += o.grads * Gr / shardG;
    if (k.zero.weights)
      G += x.dpSeconds(W, k, 1);
    if (ph == Phase::BwdLast)
      G += (k.zero.grads || k.zero.optimizer) ? x.dpSeconds(Gr, k, 1) : x.dpSeconds(Gr, k, 2);
    else if (k.zero.grads)
      G += x.dpSeconds(Gr, k, 1);
  }
  H = x.h2d(hBytes);
  D = x.d2h(dBytes);
  return p;
}

/// A phase of the whole stage: every layer, plus the exposed fetch of the
/// first layer (nothing to hide it behind) and drain of the last.
PhaseLoad stagePhase(Phase ph, const StageKnobs &k, const StageNumbers &n, const Cluster &c,
                     const Transfers &x, const InterferenceTable &it) {
  PhaseLoad total;
  int full = k.layers - k.ckpt;
  for (bool ckpt : {false, true}) {
    int count = ckpt ? k.ckpt : full;
    if (count == 0)
      continue;
    PhaseLoad l = layerLoad(ph, ckpt, k, n.layer, c, x);
    total.elapsed += count * (it.overlap(l.busy) + l.tp);
    total.tp += count * l.tp;
    for (unsigned s = 0; s < numStreams; ++s)
      total.busy[s] += count * l.busy[s];
  }
  // Layer i computes while layer i+1 is fetched and layer i-1 drained; the
  // first layer's fetch and the last layer's drain have nothing to hide
  // behind.
  PhaseLoad edge = layerLoad(ph, /*ckpt=*/full == 0, k, n.layer, c, x);
  total.elapsed += std::max(edge.busy[1], edge.busy[2]) + edge.busy[3];
  bool fwd = ph == Phase::FwdStable || ph == Phase::FwdFirst;
  auto extra = [&](const RegionNumbers &r) {
    double comp = fwd ? r.fwdCompute : r.bwdCompute, tp = fwd ? r.tpFwd : r.tpBwd;
    total.busy[0] += comp;
    total.tp += tp;
    total.elapsed += comp + tp;
    if (ph == Phase::BwdLast && k.dp > 1) { // pre/post gradient reduction, exposed
      double g = x.dpSeconds(bf16Bytes * r.params, k, 2);
      total.busy[1] += g;
      total.elapsed += g;
    }
  };
  if (k.first)
    extra(n.pre);
  if (k.last)
    extra(n.post);
  return total;
}

MemoryBreakdown stageMemory(const StageKnobs &k, const StageNumbers &n) {
  const RegionNumbers &L = n.layer;
  const OffloadRatios &o = k.offload;
  double shardW = k.zero.weights ? k.dp : 1, shardG = k.zero.grads ? k.dp : 1,
         shardO = k.zero.optimizer ? k.dp : 1;
  double P = k.layers * L.params + (k.first ? n.pre.params : 0) + (k.last ? n.post.params : 0);
  MemoryBreakdown m;
  m.weights = bf16Bytes * P / shardW * (1 - o.weights);
  m.grads = bf16Bytes * P / shardG * (1 - o.grads);
  m.optimizer = stateBytes * P / shardO * (1 - o.optimizer);
  // Sharded or offloaded layers are gathered into a double buffer (the
  // layer in use and the one being prefetched); offloaded optimizer state is
  // staged one layer at a time for its step.
  if (k.zero.weights || o.weights > 0)
    m.buffers += 2 * bf16Bytes * L.params;
  if (k.zero.grads || o.grads > 0)
    m.buffers += 2 * bf16Bytes * L.params;
  if (o.optimizer > 0)
    m.buffers += stateBytes * L.params / shardO;

  int full = k.layers - k.ckpt;
  double perMicroBatch = full * L.savedFull + k.ckpt * L.savedCkpt + (k.first ? n.pre.savedFull : 0);
  double keep = 1 - o.activations;
  double waiting = std::max(0, k.inflight - 1) * perMicroBatch * keep;
  // Current micro-batch: everything before its last layer, kept (or being
  // swapped out through a one-layer staging buffer), plus the last layer's
  // working set; the last stage then runs the head and the loss.
  int fullBefore = std::min(k.layers - 1, full), ckptBefore = k.layers - 1 - fullBefore;
  double before = ((k.first ? n.pre.savedFull : 0) + fullBefore * L.savedFull +
                   ckptBefore * L.savedCkpt) * keep +
                  (o.activations > 0 ? o.activations * L.savedFull : 0);
  bool lastCkpt = k.ckpt > 0;
  double fwdWork = lastCkpt ? L.fwdPeakCkpt : L.fwdPeakFull;
  double bwdWork = std::max(L.bwdPeak, lastCkpt ? L.fwdPeakFull + L.gradIn : 0.0);
  if (k.last) {
    double lastSaved = lastCkpt ? L.savedCkpt : L.savedFull;
    double head = lastSaved + std::max(n.post.fwdPeakFull, n.post.bwdPeak);
    fwdWork = std::max(fwdWork, head);
  }
  double states = m.weights + m.grads + m.optimizer + m.buffers;
  m.savedActivations = waiting + before;
  m.transient = std::max(fwdWork, bwdWork);
  m.fwdPeak = states + waiting + before + fwdWork;
  m.bwdPeak = states + waiting + before + bwdWork;
  return m;
}

} // namespace

StageEstimate mist::estimateStage(const StageKnobs &k, const StageNumbers &n, const Cluster &c,
                                  const InterferenceTable &interference) {
  Transfers x{c};
  StageEstimate e;
  e.fwdStable = stagePhase(Phase::FwdStable, k, n, c, x, interference);
  e.bwdStable = stagePhase(Phase::BwdStable, k, n, c, x, interference);
  e.fwdFirst = stagePhase(Phase::FwdFirst, k, n, c, x, interference);
  e.bwdLast = stagePhase(Phase::BwdLast, k, n, c, x, interference);
  double stable = e.fwdStable.elapsed + e.bwdStable.elapsed;
  double edges = e.fwdFirst.elapsed + e.bwdLast.elapsed;
  if (k.gradAccum == 1) {
    e.t = edges;
    e.d = 0;
  } else {
    e.t = stable;
    e.d = edges - stable;
  }
  e.mem = stageMemory(k, n);
  e.fits = e.mem.peak() <= c.usableBytes();
  return e;
}

double mist::pipelineSeconds(const std::vector<double> &t, const std::vector<double> &d, int G) {
  double sum = 0, maxT = 0, maxD = -INFINITY, before = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    sum += t[i];
    maxT = std::max(maxT, t[i]);
    maxD = std::max(maxD, d[i] - before);
    before += t[i];
  }
  return sum + (G - 1) * maxT + std::max(0.0, maxD);
}

std::optional<PipelineEstimate> mist::estimatePlan(const Plan &plan, const ModelProfile &model,
                                                   const Cluster &cluster, DiagnosticEngine &diag) {
  auto fail = [&](const std::string &msg) {
    diag.error({}, "plan: " + msg);
    return std::nullopt;
  };
  const int S = static_cast<int>(plan.stages.size());
  if (S == 0)
    return fail("it has no stages");
  if (plan.gradAccum < 1)
    return fail("grad_accum must be at least 1");
  int expectFirst = 0, gpus = 0;
  for (int i = 0; i < S; ++i) {
    const StagePlan &st = plan.stages[i];
    std::string where = "stage " + std::to_string(i) + ": ";
    if (st.firstLayer != expectFirst || st.lastLayer < st.firstLayer)
      return fail(where + "layers must continue at " + std::to_string(expectFirst));
    expectFirst = st.lastLayer + 1;
    if (st.ckptLayers < 0 || st.ckptLayers > st.layers())
      return fail(where + "ckpt_layers must be between 0 and the stage's layer count");
    if (st.dp * st.tp != st.gpus())
      return fail(where + "dp x tp = " + std::to_string(st.dp * st.tp) + " but the mesh has " +
                  std::to_string(st.gpus()) + " GPUs");
    if (int64_t(st.microBatch) * st.dp * plan.gradAccum != plan.globalBatch)
      return fail(where + "micro_batch x dp x grad_accum = " +
                  std::to_string(int64_t(st.microBatch) * st.dp * plan.gradAccum) +
                  " but the global batch is " + std::to_string(plan.globalBatch));
    if (st.meshGpusPerNode > cluster.gpusPerNode || st.meshNodes > cluster.nodes)
      return fail(where + "its mesh does not fit the cluster's nodes");
    if (st.tp > st.meshGpusPerNode && !cluster.tpAcrossNodes)
      return fail(where + "tp = " + std::to_string(st.tp) + " spans nodes, which the cluster does not allow");
    if (auto bad = model.violatedAssumption(st.tp))
      return fail(where + "tp = " + std::to_string(st.tp) + " breaks the model's assumption " + *bad);
    gpus += st.gpus();
  }
  if (expectFirst != model.numLayers)
    return fail("the stages cover " + std::to_string(expectFirst) + " layers but the model has " +
                std::to_string(model.numLayers));
  if (gpus > cluster.totalGpus())
    return fail("it uses " + std::to_string(gpus) + " GPUs but the cluster has " +
                std::to_string(cluster.totalGpus()));

  InterferenceTable interference(cluster);
  PipelineEstimate pe;
  std::vector<double> t, d;
  pe.fits = true;
  for (int i = 0; i < S; ++i) {
    const StagePlan &st = plan.stages[i];
    StageKnobs k;
    k.layers = st.layers();
    k.ckpt = st.ckptLayers;
    k.microBatch = st.microBatch;
    k.dp = st.dp;
    k.tp = st.tp;
    k.meshNodes = st.meshNodes;
    k.meshGpusPerNode = st.meshGpusPerNode;
    k.zero = st.zero;
    k.offload = st.offload;
    k.first = i == 0;
    k.last = i == S - 1;
    k.inflight = std::min(S - i, plan.gradAccum);
    k.gradAccum = plan.gradAccum;
    StageNumbers n{model.evaluate(RegionKind::Layer, st.microBatch, st.tp, cluster),
                   model.evaluate(RegionKind::Pre, st.microBatch, st.tp, cluster),
                   model.evaluate(RegionKind::Post, st.microBatch, st.tp, cluster)};
    StageEstimate e = estimateStage(k, n, cluster, interference);
    // Activations go to the next stage and gradients come back, once per
    // micro-batch each way, between nodes when a stage fills its nodes.
    bool interNode = st.gpus() >= cluster.gpusPerNode;
    double bw = (interNode ? cluster.p2pInterGBs : cluster.p2pIntraGBs) * 1e9;
    auto send = [&](double bytes) {
      return bw > 0 ? bytes / bw + cluster.p2pLatencyUs * 1e-6 : 0;
    };
    e.p2p = (i + 1 < S ? send(n.layer.output) : 0) + (i > 0 ? send(n.layer.gradIn) : 0);
    e.t += e.p2p;
    pe.fits &= e.fits;
    t.push_back(e.t);
    d.push_back(e.d);
    pe.stages.push_back(e);
  }
  pe.iterationSeconds = pipelineSeconds(t, d, plan.gradAccum);
  if (pe.iterationSeconds > 0) {
    pe.tokensPerSecond = double(plan.globalBatch) * model.seqLen / pe.iterationSeconds;
    pe.tflopsPerGpu = model.modelFlopsPerSample * plan.globalBatch / pe.iterationSeconds / gpus / 1e12;
  }
  return pe;
}
