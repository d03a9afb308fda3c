//===- StageModel.h - Memory and time of a pipeline stage -----------------===//
/// \file
/// Predicts, for one pipeline stage under a setting of every knob (layers,
/// checkpointed layers, micro-batch, dp, tp, ZeRO flags, offload ratios,
/// position in the pipeline), its peak device memory broken down by kind
/// and its time: `t`, forward+backward of a steady micro-batch, and `d`,
/// the extra paid once per iteration by the first forward (per-layer
/// optimizer step, ZeRO gathers, optimizer-state swaps) and the last
/// backward (gradient reduction). The pipeline iteration time is
///   T = sum t_i + (G-1) max t_i + max_i (d_i - sum_{j<i} t_j).
/// Each layer's four streams (compute, GPU<->GPU, host->GPU, GPU->host) run
/// concurrently, slowed by the cluster's interference factors; tp
/// collectives sit on the critical path, or with tp-communication overlap
/// beside the layer's GEMMs. The model and its simplifications
/// are documented in docs/perf-model.md.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Plan.h"
#include "perfmodel/ModelProfile.h"
#include "schedule/Schedule.h"

namespace mist {

/// Per-stream slow-down factors for every subset of busy streams, read once
/// from the cluster so the search loop does no lookups.
class InterferenceTable {
public:
  explicit InterferenceTable(const Cluster &c);
  /// Time to drain the per-stream loads when they run together.
  double overlap(const double load[numStreams]) const;

private:
  double factor[1 << numStreams][numStreams];
};

/// A stage's knobs as the model prices them: the schedule's (layers,
/// checkpointing, dp, tp, ZeRO, offload, place in the pipeline, G) and the
/// micro-batch, mesh and in-flight count the costs also depend on.
struct StageKnobs : ScheduleKnobs {
  int microBatch = 1;
  int meshNodes = 1, meshGpusPerNode = 1;
  int inflight = 1; ///< micro-batches whose activations it holds (1F1B: S - i)
  /// Interleaved 1F1B: the chunk-runs (a micro-batch through one of the
  /// stage's chunks) whose activations it holds at most, the one under way
  /// included (inflightChunks); a micro-batch holds only the chunks it has
  /// been through.
  int chunksInFlight = 1;
  /// Megatron-LM's sequence parallelism (the region numbers must be
  /// evaluated with it) and tp-communication overlap: each layer's tp
  /// collectives run beside its GEMMs instead of between them.
  bool sequenceParallel = false, tpCommOverlap = false;
  /// Plan::selectiveRecompute: the layers not checkpointed recompute their
  /// norms and activation functions (RegionNumbers' *Selective figures).
  bool selectiveRecompute = false;
  /// Plan::overlapGradReduce: false prices the last backward's gradient
  /// reductions after it instead of beside it.
  bool overlapGradReduce = true;
};

struct MemoryBreakdown {
  double weights = 0, grads = 0, optimizer = 0, buffers = 0;
  double savedActivations = 0; ///< kept for backward (in-flight micro-batches and current)
  double transient = 0;        ///< working set of the layer being computed
  /// Activations each waiting in-flight micro-batch keeps on the device: the
  /// peak grows by this much per extra micro-batch in flight.
  double perInflight = 0;
  /// Pinned host memory this GPU's offloaded state and activations occupy,
  /// and its growth per extra in-flight micro-batch.
  double host = 0, hostPerInflight = 0;
  double fwdPeak = 0, bwdPeak = 0;
  double peak() const { return std::max(fwdPeak, bwdPeak); }
};

/// Busy seconds of each stream in one phase of one micro-batch.
struct PhaseLoad {
  double busy[numStreams] = {0, 0, 0, 0};
  /// Of busy[1], the weight gathers a layer waits for before it computes;
  /// the rest reduces its gradients after. (Stream 2 only fetches, stream 3
  /// only drains.)
  double gather = 0;
  double tp = 0; ///< tp collectives on the critical path
  /// The GEMMs beside which overlapped tp collectives run (the layer's, in
  /// the phase); with tpCommOverlap, `tp` is what they add to them.
  double tpGemm = 0;
  /// tp collectives that run beside the GEMMs even without tpCommOverlap
  /// (sequence parallelism's backward re-gathers); `tp` includes what they add.
  double tpBeside = 0;
  /// Gradient reductions run after the phase's compute, not beside it
  /// (!StageKnobs::overlapGradReduce, the last backward); not in busy[1].
  double reduceAfter = 0;
  double elapsed = 0; ///< wall time of the phase
};

/// One micro-batch's compute per region (kernels only, no collectives or
/// transfers) and the optimizer steps: what a trainer's measured timeline
/// (--trace) holds per region, for region-by-region comparisons.
struct RegionTimes {
  double layerFwd = 0, layerBwd = 0, layerOptimizer = 0;   ///< one layer
  double preFwd = 0, preBwd = 0, postFwd = 0, postBwd = 0; ///< 0 where the stage has none
  double preOptimizer = 0, postOptimizer = 0;
};

struct StageEstimate {
  double t = 0, d = 0;
  PhaseLoad fwdStable, bwdStable, fwdFirst, bwdLast;
  RegionTimes regions;
  double p2p = 0; ///< activation send time added to t
  MemoryBreakdown mem;
  bool fits = false;
};

/// The numbers of the regions a stage runs, at its micro-batch and tp.
struct StageNumbers {
  RegionNumbers layer, pre, post;
};

/// What a stage's estimate needs beyond its knobs, computed once per stage
/// context (micro-batch, dp, tp, mesh): the region numbers and the times of
/// the data-parallel collectives, so scoring a strategy does no lookups.
struct StageConstants {
  StageNumbers numbers;
  double gatherWeights = 0, scatterGrads = 0, reduceGrads = 0; ///< one layer, over dp
  double reducePre = 0, reducePost = 0;                        ///< pre/post gradients, over dp
  double adamSecondsPerParam = 0;
  double clearGradSecondsPerParam = 0; ///< zeroing a gradient sum for the next step
  double h2dGBs = 0, d2hGBs = 0, hostLatencyUs = 0;
  double usableBytes = 0;
  double hostBytes = INFINITY; ///< Cluster::hostBytesPerGpu
};

/// Uses only the context fields of `ctx` (micro-batch, dp, tp, mesh).
StageConstants makeStageConstants(const StageKnobs &ctx, const StageNumbers &n, const Cluster &c);

/// One layer's loads and overlapped time in each phase (indexed by Phase,
/// schedule/Schedule.h) without and with checkpointing. They depend on the ZeRO flags and offload
/// ratios but not on how many layers are checkpointed, so a search computes them once for every
/// checkpoint count.
struct LayerTimes {
  PhaseLoad load[4][2];
  /// Wall time of one layer's slot in a run of layers: its compute beside
  /// the next layer's fetch and the previous layer's drain (`elapsed`); the
  /// first layer's slot has no drain beside it (`firstSlot`), the last's no
  /// fetch (`lastSlot`). [phase][checkpointed]
  double elapsed[4][2], firstSlot[4][2], lastSlot[4][2];
  MemoryBreakdown states; ///< weights, grads, optimizer, buffers (no activations)
};
LayerTimes layerTimes(const StageKnobs &k, const StageConstants &sc,
                      const InterferenceTable &interference);

StageEstimate estimateStage(const StageKnobs &k, const StageConstants &sc, const LayerTimes &lt);

/// t, d and peak memory only: what the search needs, computed by the same
/// functions as estimateStage without the per-stream breakdown.
struct StageScore {
  double t = 0, d = 0, peakBytes = 0;
  double perInflightBytes = 0;                    ///< MemoryBreakdown::perInflight
  double hostBytes = 0, hostPerInflightBytes = 0; ///< MemoryBreakdown::host, hostPerInflight
  bool fits = false;
};
StageScore scoreStage(const StageKnobs &k, const StageConstants &sc, const LayerTimes &lt);

/// Whether a stage's device peak and pinned host memory fit the budgets.
inline bool fitsIn(const MemoryBreakdown &m, const StageConstants &sc) {
  return m.peak() <= sc.usableBytes && m.host <= sc.hostBytes;
}

/// The pieces of scoreStage, for searches that check memory before paying
/// for times: the state memory (what LayerTimes::states holds), the full
/// memory breakdown from it, and t and d.
MemoryBreakdown stageStateMemory(const StageKnobs &k, const StageNumbers &n);
MemoryBreakdown stageMemory(const StageKnobs &k, const StageNumbers &n,
                            const MemoryBreakdown &states);
void stageTimes(const StageKnobs &k, const StageConstants &sc, const LayerTimes &lt, double &t,
                double &d);
StageEstimate estimateStage(const StageKnobs &k, const StageConstants &sc,
                            const InterferenceTable &interference);
StageEstimate estimateStage(const StageKnobs &k, const StageNumbers &n, const Cluster &c,
                            const InterferenceTable &interference);

struct PipelineEstimate {
  std::vector<StageEstimate> stages;
  double iterationSeconds = 0;
  double tokensPerSecond = 0;
  double tflopsPerGpu = 0; ///< model FLOPs (no recompute) per second per GPU
  bool fits = false;
};

/// The 1F1B iteration from the stages' t and d (the file comment's formula);
/// with `v` virtual stages (interleaved 1F1B) the fill and drain shrink by v:
///   T = sum t_i / v + (G - 1/v) max t_i + max_i (d_i - sum_{j<i} t_j / v),
/// which for equal t is Megatron-LM's (G + (S - 1) / v) t.
double pipelineSeconds(const std::vector<double> &t, const std::vector<double> &d, int G,
                       int v = 1);

/// Micro-batches whose activations stage i of S holds at its peak, in units
/// of the stage's activations of one micro-batch: S - i under 1F1B (at most
/// G); interleaved, Megatron-LM's warm-up of (S - i - 1) * 2 + (v - 1) * S
/// chunk forwards plus the current one, each a v-th of the stage (at most
/// G * v chunks), rounded up to whole micro-batches.
int inflightMicroBatches(int i, int S, int G, int v = 1);
/// Interleaved, the most chunk-runs stage i holds: Megatron-LM's warm-up
/// forwards plus the one under way, (S - i - 1) 2 + (v - 1) S + 1, at most G v.
int inflightChunks(int i, int S, int G, int v);

/// What makes a plan impossible for a model and cluster: the stage (-1 for
/// the plan as a whole) and the plan key at fault, so a caller that knows
/// where the plan file says it can point there.
struct PlanProblem {
  int stage = -1;
  std::string key; ///< "layers", "mesh", "tp", "micro_batch", ...; "stages" for the whole list
  std::string message;
  bool aboutModelLayers = false; ///< the stages do not cover the model's layers
};
std::optional<PlanProblem> planProblem(const Plan &plan, const ModelProfile &model,
                                       const Cluster &cluster);

/// Checks the plan against the model and cluster (divisibility, GPU count,
/// layer ranges) and predicts every stage and the whole iteration.
std::optional<PipelineEstimate> estimatePlan(const Plan &plan, const ModelProfile &model,
                                             const Cluster &cluster, DiagnosticEngine &diag);

} // namespace mist
