//===- Tuner.cpp - Finds the fastest plan that fits -----------------------===//
#include "tuner/Tuner.h"

#include "perfmodel/Evaluator.h"
#include "tuner/InterStage.h"
#include "tuner/Pareto.h"
#include "llvm/Support/raw_ostream.h"
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

using namespace mist;

namespace {

/// A concrete strategy of one stage, referenced by MILP candidates.
struct StageConfig {
  int layers, ckpt, microBatch, dp, tp;
  int meshNodes, meshGpusPerNode;
  ZeroFlags zero;
  OffloadRatios offload;
};

/// The mesh of a stage with `gpus` GPUs: whole nodes, or a divisor of one.
std::optional<std::pair<int, int>> meshOf(int gpus, int gpusPerNode) {
  if (gpus >= gpusPerNode)
    return gpus % gpusPerNode ? std::nullopt
                              : std::optional(std::pair(gpus / gpusPerNode, gpusPerNode));
  return gpusPerNode % gpus ? std::nullopt : std::optional(std::pair(1, gpus));
}

/// The tp degrees the tuner tries: powers of two up to the cluster's GPUs
/// (up to a node's unless tp may span nodes) that break no divisibility
/// assumption of the model; `failure` gets the first one that does.
std::vector<int> validTpDegrees(const ModelProfile &model, const Cluster &cluster,
                                std::string *failure) {
  std::vector<int> valid;
  for (int tp = 1; tp <= cluster.totalGpus(); tp *= 2) {
    if (tp > cluster.gpusPerNode && !cluster.tpAcrossNodes)
      break;
    if (auto bad = model.violatedAssumption(tp)) {
      if (failure && failure->empty())
        *failure = fmt::format("tp = {} breaks {}", tp, *bad);
      continue;
    }
    valid.push_back(tp);
  }
  return valid;
}

/// Stages differ in running pre (first) and post (last) and in how many
/// micro-batches they hold, min(S - i, G), which only shifts the peak by
/// whole micro-batches of activations: each (first, last) class is scored
/// once and the fit is checked per position.
struct PositionClass {
  bool first, last;
  std::vector<int> positions; ///< increasing, so the last holds the fewest micro-batches
};

std::vector<PositionClass> positionClasses(int S) {
  std::vector<PositionClass> classes;
  for (int i = 0; i < S; ++i) {
    bool first = i == 0, last = i == S - 1;
    auto it = std::find_if(classes.begin(), classes.end(), [&](const PositionClass &c) {
      return c.first == first && c.last == last;
    });
    if (it == classes.end())
      it = classes.insert(classes.end(), PositionClass{first, last, {}});
    it->positions.push_back(i);
  }
  return classes;
}

/// The stages buildTable scores together: one mesh size, layer count and
/// position class of an S-stage pipeline at this G.
struct StageSlot {
  int S, G;
  int gpus;                 ///< of each stage's mesh
  std::pair<int, int> mesh; ///< nodes, GPUs per node
  int layers;
  const PositionClass &cls;
  int fewest; ///< micro-batches held at the class's last position, where it is scored
};

/// One scored context of a slot: a tp with the dp and micro-batch it gives.
struct ScoredContext {
  int tp, microBatch, dp;
  double outputBytes, gradInBytes; ///< sent to the next / previous stage per micro-batch
  const StrategyBatch *batch;
  std::vector<StrategyResult> results;
};

/// Buffers a slot's frontiers are built in, kept across slots.
struct FrontierScratch {
  FrontierBuilder whole, group;
  std::vector<std::pair<size_t, size_t>> owner; ///< point index -> (scored, strategy)
};

/// Whether stage i's activations go to the next stage between nodes.
bool crossesNodesAfter(const Cluster &cluster, bool uniform, int gpus, int i) {
  return uniform ? p2pCrossesNodes(cluster, i * gpus, (i + 1) * gpus, gpus) : cluster.nodes > 1;
}

class Tuner {
public:
  Tuner(const ModelProfile &model, const Cluster &cluster, int64_t B, const TunerOptions &opts,
        DiagnosticEngine &diag)
      : model(model), cluster(cluster), B(B), opts(opts), diag(diag), interference(cluster),
        start(std::chrono::steady_clock::now()) {}

  std::optional<TuneResult> run();

private:
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  bool outOfTime() {
    if (opts.timeLimitSeconds > 0 && elapsed() > opts.timeLimitSeconds)
      stats.timedOut = true;
    return stats.timedOut;
  }
  const StageNumbers &numbers(int b, int tp) {
    const bool sp = planWide.sequenceParallel;
    auto key = std::make_tuple(b, tp, sp);
    auto it = numberCache.find(key);
    if (it == numberCache.end())
      it = numberCache
               .emplace(key, StageNumbers{model.evaluate(RegionKind::Layer, b, tp, cluster, sp),
                                          model.evaluate(RegionKind::Pre, b, tp, cluster, sp),
                                          model.evaluate(RegionKind::Post, b, tp, cluster, sp)})
               .first;
    return it->second;
  }
  /// The strategies a stage of `layers` layers and this dp may take in an
  /// S-stage pipeline (the space's rules may depend on both).
  const StrategyBatch &strategies(int layers, int dp, int S) {
    auto key = std::make_tuple(layers, dp > 1, S > 1, recomputeAll);
    auto it = batchCache.find(key);
    if (it != batchCache.end())
      return it->second;
    StrategyBatch batch;
    // Checkpoint count innermost: the evaluator reuses layer times across it.
    for (const ZeroFlags &z : opts.space.zeroOptions(dp))
      for (const OffloadRatios &o : offloads)
        for (int c : opts.space.ckptOptions(layers, recomputeAll))
          if (opts.space.allows(z, o, c, layers, S))
            batch.add(z, o, c);
    return batchCache.emplace(key, std::move(batch)).first->second;
  }

  /// The candidates of every stage of an S-stage pipeline for this G, with
  /// stage meshes of the given sizes (one size: uniform meshes, whose
  /// placement, and so p2p, is exact; several: non-uniform, p2p between
  /// nodes assumed wherever the cluster has several). `onlyTp` > 0
  /// restricts tp to one value.
  void buildTable(int S, int G, const std::vector<int> &sizes, int onlyTp, StageTable &table);
  /// Scores the slot's strategies at every tp it allows into `scored`.
  void scoreSlot(const StageSlot &slot, int onlyTp, std::vector<ScoredContext> &scored);
  /// The sampled frontier of position i of the slot, whose neighbours are
  /// on other nodes or not as crossPrev and crossNext say, as candidates.
  std::vector<StageCandidate> positionCandidates(const StageSlot &slot,
                                                 const std::vector<ScoredContext> &scored, int i,
                                                 bool crossPrev, bool crossNext,
                                                 FrontierScratch &scratch);
  /// Solves the MILP for a table and keeps the plan when it is the best so
  /// far (and, where the space allows, its interleaved variants).
  void consider(int S, int G, const StageTable &table, int totalGpus);
  /// Prices a plan as the report does and keeps it when it fits and beats the best.
  void keepIfBest(const Plan &plan);
  /// Every G for S stages: the tables of the uniform meshes (when `uniform`)
  /// and of the `mixed` sizes, and their MILPs. True when some stage
  /// splits the batch.
  bool searchStageCount(int S, bool uniform, const std::vector<int> &mixed);
  /// The error that says why no plan was found.
  void explainNoPlan(const std::string &tpFailure, bool anyBatchSplit);
  /// The best plan with the report's estimate and its predicted figures.
  std::optional<TuneResult> bestResult();
  /// Whether some stage of `gpus` GPUs can split the batch at this G.
  bool splitsBatch(int64_t G, int gpus) const {
    for (int tp : validTp)
      if (gpus % tp == 0 && B % (G * (gpus / tp)) == 0)
        return true;
    return false;
  }

  /// A progress line at most once a second while one stage count is
  /// searched, so a long search is never silent.
  void heartbeat(int S, int64_t G) {
    if (!opts.progress || elapsed() < lastProgress + 1)
      return;
    lastProgress = elapsed();
    llvm::errs() << fmt::format("mistc: tuning {} stage{}, G = {}: {} strategies scored, best "
                                "{:.4g} s, {:.1f} s elapsed\n",
                                S, S == 1 ? "" : "s", G, stats.evaluations, bestObjective,
                                lastProgress);
  }

  const ModelProfile &model;
  const Cluster &cluster;
  int64_t B;
  const TunerOptions &opts;
  DiagnosticEngine &diag;
  InterferenceTable interference;
  std::chrono::steady_clock::time_point start;
  std::vector<OffloadRatios> offloads;
  std::vector<int> validTp;                                       ///< tp degrees the model allows
  std::map<std::tuple<int, int, bool>, StageNumbers> numberCache; ///< (b, tp, sp)
  /// How tp runs in this search (one search per choice the space allows).
  PlanWideChoice planWide;
  std::map<std::tuple<int, bool, bool, bool>, StrategyBatch> batchCache;
  /// In a space with uniform recomputation: whether this search recomputes
  /// every layer of every stage (else none).
  bool recomputeAll = false;
  std::vector<StageConfig> configs;
  TuneStats stats;
  double bestObjective = INFINITY;
  double lastProgress = 0; ///< elapsed seconds at the last progress line
  std::optional<Plan> bestPlan;
  double smallestPeak = INFINITY; ///< over every strategy scored, for the infeasible message
  bool hostBound = false;         ///< some strategy fit the device but not the host memory
  double smallestHost = INFINITY; ///< the least host memory of those
};

void Tuner::buildTable(int S, int G, const std::vector<int> &sizes, int onlyTp, StageTable &table) {
  const int gpus = cluster.totalGpus();
  const bool uniform = sizes.size() == 1;
  table.assign(S, {});
  const std::vector<PositionClass> classes = positionClasses(S);
  std::vector<ScoredContext> scored;
  FrontierScratch scratch;
  for (int g : sizes) {
    auto mesh = meshOf(g, cluster.gpusPerNode);
    if (!mesh)
      continue;
    for (int l :
         opts.space.layerOptionsForShare(model.numLayers, S, uniform ? 1 : g, uniform ? S : gpus)) {
      for (const PositionClass &cls : classes) {
        if (outOfTime())
          return; // a partial table; the caller considers none after the limit
        heartbeat(S, G);
        // Scored at the position holding the fewest micro-batches; the others
        // need perInflightBytes more per extra micro-batch.
        const StageSlot slot{S, G, g, *mesh, l, cls, std::min(S - cls.positions.back(), G)};
        scoreSlot(slot, onlyTp, scored);
        // Positions holding as many micro-batches, with their neighbours on
        // the same nodes or not alike, share a frontier.
        std::map<std::tuple<int, bool, bool>, std::vector<StageCandidate>> byPosition;
        for (int i : cls.positions) {
          const int inflight = std::min(S - i, G);
          const bool crossPrev = i > 0 && crossesNodesAfter(cluster, uniform, g, i - 1),
                     crossNext = i + 1 < S && crossesNodesAfter(cluster, uniform, g, i);
          auto key = std::make_tuple(inflight, crossPrev, crossNext);
          auto it = byPosition.find(key);
          if (it == byPosition.end())
            it = byPosition
                     .emplace(key,
                              positionCandidates(slot, scored, i, crossPrev, crossNext, scratch))
                     .first;
          std::vector<StageCandidate> &cands = table[i][l];
          cands.insert(cands.end(), it->second.begin(), it->second.end());
        }
      }
    }
  }
  // A layer count with no candidate is no option.
  for (auto &byLayers : table)
    for (auto it = byLayers.begin(); it != byLayers.end();)
      it = it->second.empty() ? byLayers.erase(it) : std::next(it);
}

void Tuner::scoreSlot(const StageSlot &slot, int onlyTp, std::vector<ScoredContext> &scored) {
  const double usable = cluster.usableBytes(), hostUsable = cluster.hostBytesPerGpu();
  scored.clear();
  for (int tp : validTp) {
    if (slot.gpus % tp || (onlyTp > 0 && tp != onlyTp))
      continue;
    int dp = slot.gpus / tp;
    if (B % (int64_t(slot.G) * dp) != 0)
      continue;
    int b = static_cast<int>(B / (int64_t(slot.G) * dp));
    StageContext ctx;
    ctx.layers = slot.layers;
    ctx.microBatch = b;
    ctx.dp = dp;
    ctx.tp = tp;
    ctx.meshNodes = slot.mesh.first;
    ctx.meshGpusPerNode = slot.mesh.second;
    ctx.first = slot.cls.first;
    ctx.last = slot.cls.last;
    ctx.inflight = slot.fewest;
    ctx.gradAccum = slot.G;
    ctx.sequenceParallel = planWide.sequenceParallel;
    ctx.tpCommOverlap = planWide.commOverlap;
    ctx.selectiveRecompute = planWide.selectiveRecompute;
    const StageNumbers &n = numbers(b, tp);
    StageEvaluator eval(n, cluster, ctx);
    const StrategyBatch &batch = strategies(slot.layers, dp, slot.S);
    ScoredContext &sc = scored.emplace_back();
    sc.tp = tp;
    sc.microBatch = b;
    sc.dp = dp;
    sc.outputBytes = n.layer.output;
    sc.gradInBytes = n.layer.gradIn;
    sc.batch = &batch;
    sc.results.resize(batch.size());
    eval.evaluate(batch, sc.results, /*timesOfFitsOnly=*/true);
    stats.evaluations += batch.size();
    ++stats.contexts;
    for (const StrategyResult &r : sc.results) {
      smallestPeak = std::min(smallestPeak, r.peakBytes);
      if (r.peakBytes <= usable && r.hostBytes > hostUsable) {
        hostBound = true;
        smallestHost = std::min(smallestHost, r.hostBytes);
      }
    }
  }
}

std::vector<StageCandidate> Tuner::positionCandidates(const StageSlot &slot,
                                                      const std::vector<ScoredContext> &scored,
                                                      int i, bool crossPrev, bool crossNext,
                                                      FrontierScratch &scratch) {
  const double usable = cluster.usableBytes(), hostUsable = cluster.hostBytesPerGpu();
  const int S = slot.S, G = slot.G;
  const int extra = std::min(S - i, G) - slot.fewest; // micro-batches held beyond the scored
  scratch.whole.clear();
  scratch.owner.clear();
  for (size_t c = 0; c < scored.size(); ++c) {
    const ScoredContext &sc = scored[c];
    const StrategyBatch &batch = *sc.batch;
    const double p2p = (i + 1 < S ? p2pSeconds(cluster, crossNext, sc.outputBytes) : 0) +
                       (i > 0 ? p2pSeconds(cluster, crossPrev, sc.gradInBytes) : 0);
    // The frontier of the union is the frontier of the groups'
    // frontiers; groups are small, so most points die cheaply there.
    for (size_t gi = 0; gi < batch.numGroups(); ++gi) {
      scratch.group.clear();
      const size_t begin = batch.groupStart(gi), end = batch.groupStart(gi + 1);
      for (size_t s = begin; s < end; ++s) {
        const StrategyResult &r = sc.results[s];
        if (r.fits && r.peakBytes + extra * r.perInflightBytes <= usable &&
            r.hostBytes + extra * r.hostPerInflightBytes <= hostUsable)
          scratch.group.insert({r.t + p2p, r.d / G, scratch.owner.size() + (s - begin)});
      }
      for (const ParetoPoint &p : scratch.group.frontier())
        scratch.whole.insert(p);
      for (size_t s = begin; s < end; ++s)
        scratch.owner.push_back({c, s});
    }
  }
  std::vector<StageCandidate> kept;
  for (const ParetoPoint &p : sampleFrontier(scratch.whole.frontier(), opts.paretoLimit)) {
    const ScoredContext &sc = scored[scratch.owner[p.index].first];
    const StrategyBatch::Item &item = (*sc.batch)[scratch.owner[p.index].second];
    configs.push_back({slot.layers, item.ckpt, sc.microBatch, sc.dp, sc.tp, slot.mesh.first,
                       slot.mesh.second, item.zero, item.offload});
    kept.push_back({p.t, p.dPerG * G, configs.size() - 1, slot.gpus});
  }
  return kept;
}

void Tuner::consider(int S, int G, const StageTable &table, int totalGpus) {
  if (stats.timedOut)
    return; // the table may be partial
  InterStageOptions io;
  io.totalLayers = model.numLayers;
  io.gradAccum = G;
  io.imbalanceAware = opts.space.imbalanceAware();
  io.upperBound = bestObjective;
  io.totalGpus = totalGpus;
  if (!opts.dumpMilpDir.empty())
    io.dumpPath = fmt::format("{}/milp_S{}_G{}_{}.lp", opts.dumpMilpDir, S, G, stats.milps);
  ++stats.milps;
  auto choice = solveInterStage(table, io);
  if (!choice)
    return;
  Plan plan;
  plan.model = model.modelName;
  plan.cluster = cluster.name;
  plan.globalBatch = static_cast<int>(B);
  plan.gradAccum = G;
  int first = 0;
  for (int i = 0; i < S; ++i) {
    const StageConfig &c = configs[choice->configs[i]];
    StagePlan st;
    st.firstLayer = first;
    st.lastLayer = first + c.layers - 1;
    first += c.layers;
    st.meshNodes = c.meshNodes;
    st.meshGpusPerNode = c.meshGpusPerNode;
    st.microBatch = c.microBatch;
    st.dp = c.dp;
    st.tp = c.tp;
    st.zero = c.zero;
    st.ckptLayers = c.ckpt;
    st.offload = c.offload;
    plan.stages.push_back(st);
  }
  // Only tp > 1 has anything to split or overlap; plans without it say so.
  const bool anyTp = std::any_of(plan.stages.begin(), plan.stages.end(),
                                 [](const StagePlan &st) { return st.tp > 1; });
  plan.sequenceParallel = anyTp && planWide.sequenceParallel;
  plan.tpCommOverlap = anyTp && planWide.commOverlap;
  plan.selectiveRecompute = planWide.selectiveRecompute;
  // Judge every plan by the report's own estimate: the megatron ablation
  // chooses blind to d, and non-uniform tables assume the slower p2p.
  keepIfBest(plan);
  // Interleaved 1F1B, where the plan's runner has it: the same stages split
  // into v chunks each (Megatron-LM's rules: every stage's layers divisible
  // by v, G divisible by S). The MILP chose the stages for plain 1F1B; each
  // v re-prices them with its shorter fill, more p2p and more activations
  // in flight.
  if (!opts.space.interleaving || S < 2 || G % S != 0)
    return;
  int common = 0;
  for (const StagePlan &st : plan.stages)
    common = std::gcd(common, st.layers());
  for (int64_t v : divisorsOf(common))
    if (v > 1) {
      plan.virtualStages = static_cast<int>(v);
      keepIfBest(plan);
    }
}

void Tuner::keepIfBest(const Plan &plan) {
  auto est = estimatePlan(plan, model, cluster, diag);
  if (est && est->fits && est->iterationSeconds < bestObjective) {
    bestObjective = est->iterationSeconds;
    bestPlan = plan;
  }
}

bool Tuner::searchStageCount(int S, bool uniform, const std::vector<int> &mixed) {
  const int gpus = cluster.totalGpus();
  bool anyBatchSplit = false;
  for (int64_t G : divisorsOf(B)) {
    if (outOfTime())
      break;
    heartbeat(S, G);
    StageTable table;
    if (uniform && splitsBatch(G, gpus / S)) {
      anyBatchSplit = true;
      if (opts.space.tpPerStage()) {
        buildTable(S, static_cast<int>(G), {gpus / S}, 0, table);
        consider(S, static_cast<int>(G), table, 0);
      } else {
        for (int tp : validTp) { // one tp for the whole model
          if ((gpus / S) % tp || B % (G * (gpus / S / tp)))
            continue;
          // Recomputation alike on every stage: each choice is its own search.
          for (bool all :
               opts.space.uniformCkpt() ? std::vector{false, true} : std::vector{false}) {
            recomputeAll = all;
            buildTable(S, static_cast<int>(G), {gpus / S}, tp, table);
            consider(S, static_cast<int>(G), table, 0);
          }
          recomputeAll = false;
        }
      }
    }
    bool mixedSplits = false;
    for (int g : mixed)
      mixedSplits |= splitsBatch(G, g);
    if (mixedSplits) {
      anyBatchSplit = true;
      buildTable(S, static_cast<int>(G), mixed, 0, table);
      consider(S, static_cast<int>(G), table, gpus);
    }
  }
  return anyBatchSplit;
}

void Tuner::explainNoPlan(const std::string &tpFailure, bool anyBatchSplit) {
  const double gib = double(1ull << 30), usableGiB = cluster.usableBytes() / gib;
  if (stats.timedOut)
    diag.error({}, fmt::format("the time limit of {} s stopped the search before any plan was "
                               "found",
                               opts.timeLimitSeconds));
  else if (validTp.empty())
    diag.error({}, "no tensor-parallel degree divides the model: " + tpFailure);
  else if (!anyBatchSplit)
    diag.error({}, fmt::format("the global batch {} cannot be split over the data-parallel "
                               "replicas of any plan on {} GPUs",
                               B, cluster.totalGpus()));
  else if (hostBound)
    diag.error({}, fmt::format("no plan fits in memory: every plan in the '{}' space whose device "
                               "peak fits the {:.2f} GiB per GPU offloads at least {:.2f} GiB per "
                               "GPU to host memory, more than its {:.2f} GiB share of the {} GiB "
                               "pinnable per node",
                               spaceLevelName(opts.space.level), usableGiB, smallestHost / gib,
                               cluster.hostBytesPerGpu() / gib, cluster.hostMemoryGiB));
  else if (std::isfinite(smallestPeak))
    diag.error({}, fmt::format("no plan fits in memory: the smallest peak of any plan in the "
                               "'{}' space is {:.2f} GiB per GPU, the cluster allows {:.2f} GiB "
                               "({} GiB x {})",
                               spaceLevelName(opts.space.level), smallestPeak / gib, usableGiB,
                               cluster.device.memoryGiB, cluster.device.usableFraction));
  else
    diag.error({}, "no plan was found");
}

std::optional<TuneResult> Tuner::bestResult() {
  auto est = estimatePlan(*bestPlan, model, cluster, diag);
  if (!est)
    return std::nullopt;
  TuneResult r;
  r.plan = *bestPlan;
  r.estimate = *est;
  r.objective = bestObjective;
  r.plan.predicted = PlanPrediction{est->iterationSeconds, est->tokensPerSecond, {}};
  for (const StageEstimate &s : est->stages)
    r.plan.predicted->peakGiB.push_back(s.mem.peak() / (1ull << 30));
  r.stats = stats;
  return r;
}

std::optional<TuneResult> Tuner::run() {
  const int gpus = cluster.totalGpus(), gpn = cluster.gpusPerNode;
  if (B <= 0) {
    diag.error({}, "the global batch is not set: add 'global_batch = N' to the train section or "
                   "pass --global-batch");
    return std::nullopt;
  }
  offloads = opts.space.offloadOptions();
  std::string tpFailure;
  validTp = validTpDegrees(model, cluster, &tpFailure);
  bool anyBatchSplit = false;
  // Sequence parallelism, tp-communication overlap and selective
  // recomputation are plan-wide (as in Megatron-LM): each setting the space
  // allows is a search of its own;
  // the best plan found so far bounds the later searches' MILPs.
  for (const PlanWideChoice &choice : opts.space.planWideChoices()) {
    planWide = choice;
    for (int S = 1; S <= std::min(gpus, model.numLayers) && !outOfTime(); ++S) {
      const bool uniform = gpus % S == 0 && meshOf(gpus / S, gpn);
      const std::vector<int> mixed = opts.space.nonUniformMeshSizes(S, gpus, gpn);
      if (!uniform && mixed.empty())
        continue;
      anyBatchSplit |= searchStageCount(S, uniform, mixed);
      if (opts.progress)
        llvm::errs() << fmt::format("mistc: tuned {} stage{}{}: {} strategies scored, {} MILPs, "
                                    "best {:.4g} s, {:.1f} s elapsed\n",
                                    S, S == 1 ? "" : "s", planWideChoiceText(choice),
                                    stats.evaluations, stats.milps, bestObjective, elapsed());
    }
  }
  stats.seconds = elapsed();
  for (const auto &entry : numberCache)
    stats.stageShapes.emplace_back(std::get<0>(entry.first), std::get<1>(entry.first));
  std::sort(stats.stageShapes.begin(), stats.stageShapes.end());
  stats.stageShapes.erase(std::unique(stats.stageShapes.begin(), stats.stageShapes.end()),
                          stats.stageShapes.end());
  if (stats.timedOut && bestPlan)
    diag.warning({}, fmt::format("the time limit of {} s stopped the search; the plan is the best "
                                 "found so far",
                                 opts.timeLimitSeconds));
  if (!bestPlan) {
    explainNoPlan(tpFailure, anyBatchSplit);
    return std::nullopt;
  }
  return bestResult();
}

} // namespace

std::vector<std::pair<int, int>> mist::tunerStageShapes(const ModelProfile &model,
                                                        const Cluster &cluster, int64_t B,
                                                        const TunerOptions &opts) {
  // Mirrors Tuner::run and Tuner::buildTable: a stage context exists for
  // (b, tp) when some S, stage mesh of g GPUs (with layer options) and G
  // give dp = g / tp with b = B / (G dp) whole.
  std::set<std::pair<int, int>> shapes;
  if (B <= 0)
    return {};
  const int gpus = cluster.totalGpus(), gpn = cluster.gpusPerNode;
  const std::vector<int> validTp = validTpDegrees(model, cluster, nullptr);
  for (int S = 1; S <= std::min(gpus, model.numLayers); ++S) {
    auto add = [&](int g, bool uniform, int64_t G) {
      if (!meshOf(g, gpn) ||
          opts.space.layerOptionsForShare(model.numLayers, S, uniform ? 1 : g, uniform ? S : gpus)
              .empty())
        return;
      for (int tp : validTp) {
        const int dp = g / tp;
        if (g % tp == 0 && B % (G * dp) == 0)
          shapes.insert({static_cast<int>(B / (G * dp)), tp});
      }
    };
    const bool uniform = gpus % S == 0;
    const std::vector<int> mixed = opts.space.nonUniformMeshSizes(S, gpus, gpn);
    for (int64_t G : divisorsOf(B)) {
      if (uniform)
        add(gpus / S, true, G);
      for (int g : mixed)
        add(g, false, G);
    }
  }
  return {shapes.begin(), shapes.end()};
}

std::optional<TuneResult> mist::tune(const ModelProfile &model, const Cluster &cluster,
                                     int64_t globalBatch, const TunerOptions &opts,
                                     DiagnosticEngine &diag) {
  return Tuner(model, cluster, globalBatch, opts, diag).run();
}
