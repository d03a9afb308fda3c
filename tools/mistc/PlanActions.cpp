//===- PlanActions.cpp - Tune, report and trace plans for a cluster -------===//
#include "tools/mistc/PlanActions.h"

#include "backend/exports/ExportProjection.h"
#include "backend/reports/ProfileShapes.h"
#include "backend/reports/Report.h"
#include "backend/reports/ScheduleListing.h"
#include "backend/reports/Timeline.h"
#include "backend/trainer/Lowering.h"
#include "passes/Pipeline.h"
#include "support/InputFile.h"
#include "support/OutputFile.h"
#include "yaml/ClusterLoader.h"
#include "yaml/HostCluster.h"
#include "yaml/PlanLoader.h"
#include "yaml/PlanWriter.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>

using namespace mist;

namespace {

bool writePlanFile(const Plan &plan, const std::string &path, DiagnosticEngine &diag,
                   const char *what = "tuned plan");

/// A projection that does not fit cannot run: every framework can recompute
/// every layer, so try that before giving up (the price says what it costs).
void recomputeToFit(ExportProjection &projected, PipelineEstimate &cost, const ModelProfile &model,
                    const Cluster &cluster, DiagnosticEngine &diag) {
  Plan full = projected.plan;
  bool changed = false;
  for (StagePlan &s : full.stages) {
    changed |= s.ckptLayers != s.layers();
    s.ckptLayers = s.layers();
  }
  if (!changed)
    return;
  auto fullCost = estimatePlan(full, model, cluster, diag);
  if (!fullCost || !fullCost->fits)
    return;
  double worst = 0;
  for (const StageEstimate &s : cost.stages)
    worst = std::max(worst, s.mem.peak());
  projected.notes.push_back(fmt::format("every layer recomputed: without it the projection's "
                                        "predicted peak is {:.2f} GiB of {:.2f} GiB usable",
                                        worst / (1ull << 30),
                                        cluster.usableBytes() / (1ull << 30)));
  projected.plan = std::move(full);
  cost = std::move(*fullCost);
}

/// Projects the plan onto what the target framework can run, prices the
/// projection with the same model, says what changed on stderr and writes
/// the target's configuration.
bool exportPlan(const Module &m, const Plan &plan, const PipelineEstimate &estimate,
                const Cluster &cluster, const ModelProfile &model, const PlanActionOptions &opts,
                DiagnosticEngine &diag, llvm::raw_ostream &out) {
  const Emit output = opts.output;
  const bool force = opts.forceExport;
  ExportTarget target = output == Emit::Megatron    ? ExportTarget::Megatron
                        : output == Emit::DeepSpeed ? ExportTarget::DeepSpeed
                                                    : ExportTarget::TorchTitan;
  ExportProjection projected = projectForExport(plan, m.train, target, cluster.gpusPerNode);
  auto cost = estimatePlan(projected.plan, model, cluster, diag);
  if (!cost)
    return false;
  if (!cost->fits)
    recomputeToFit(projected, *cost, model, cluster, diag);
  llvm::raw_ostream &err = llvm::errs();
  const char *name = exportTargetName(target);
  if (projected.exact()) {
    projected.remarks.push_back(fmt::format("{} runs the plan as tuned: {:.4f} s per iteration "
                                            "predicted",
                                            name, estimate.iterationSeconds));
    err << "mistc: " << projected.remarks.back() << "\n";
  } else {
    err << fmt::format("mistc: {} cannot express the plan; writing the closest plan it can run:\n",
                       name);
    for (const std::string &n : projected.notes)
      err << "mistc:   - " << n << "\n";
    projected.remarks.push_back(
        fmt::format("predicted iteration: the plan {:.4f} s, the {} projection {:.4f} s ({:+.1f}%)",
                    estimate.iterationSeconds, name, cost->iterationSeconds,
                    100 * (cost->iterationSeconds / estimate.iterationSeconds - 1)));
    err << "mistc: " << projected.remarks.back() << "\n";
  }
  if (!cost->fits) {
    double worst = 0;
    for (const StageEstimate &s : cost->stages)
      worst = std::max(worst, s.mem.peak());
    std::string what = fmt::format(
        "the {} does NOT fit in device memory: predicted peak {:.2f} GiB of {:.2f} GiB usable",
        projected.exact() ? "plan" : "projection", worst / (1ull << 30),
        cluster.usableBytes() / (1ull << 30));
    if (!force) {
      diag.error({},
                 fmt::format("{} export not written: {} (--force writes it anyway)", name, what));
      return false;
    }
    projected.remarks.push_back("written with --force although " + what);
    err << "mistc: warning: " << projected.remarks.back() << "\n";
  }
  if (target == ExportTarget::DeepSpeed) {
    // A JSON config cannot say these; DeepSpeed takes them from model code.
    const Plan &p = projected.plan;
    auto remark = [&](std::string line) {
      err << "mistc: " << line << "\n";
      projected.remarks.push_back(std::move(line));
    };
    if (p.stages.size() > 1)
      remark(fmt::format("DeepSpeed builds the pipeline in code: PipelineModule(layers, "
                         "num_stages={}, partition_method=\"type:<the transformer layer "
                         "class>\") gives stages {} layers",
                         p.stages.size(), [&] {
                           std::string split;
                           for (const StagePlan &s : p.stages)
                             split += (split.empty() ? "" : "/") + std::to_string(s.layers());
                           return split;
                         }()));
    if (p.stages.front().ckptLayers > 0)
      remark(fmt::format("DeepSpeed recomputes what model code wraps in "
                         "deepspeed.checkpointing.checkpoint: the last {} layers of each stage",
                         p.stages.front().ckptLayers));
  }
  if (!opts.projectedPlanOut.empty()) {
    projected.plan.cluster = plan.cluster;
    projected.plan.model = plan.model;
    if (!writePlanFile(projected.plan, opts.projectedPlanOut, diag, "projected plan"))
      return false;
  }
  ExportModel em = exportModelOf(m);
  switch (target) {
  case ExportTarget::Megatron:
    writeMegatronArgs(projected, em, out);
    break;
  case ExportTarget::DeepSpeed:
    writeDeepSpeedConfig(projected, em, out);
    break;
  case ExportTarget::TorchTitan:
    writeTorchTitanConfig(projected, em, out);
    break;
  }
  return true;
}

/// Where a plan and the model disagree, a warning at the plan's key and a
/// note at the model: the plan's batch is the one that runs, and a plan
/// tuned for another model, sequence length or precision is priced again
/// for this one (its fit is checked, its recorded prediction is stale).
void warnOfConflicts(const Plan &plan, const PlanLocations &where, const Module &m,
                     DiagnosticEngine &diag) {
  const Symbol *seq = m.symbols.ofKind(SymbolKind::Seq);
  const int64_t seqLen = seq && seq->value ? *seq->value : 0;
  const std::string dtype = dtypeName(m.train.dtype).str();
  auto conflict = [&](const char *key, const std::string &text, const std::string &model) {
    diag.warning(where.of(-1, key), text);
    if (m.loc.isValid())
      diag.note(m.loc, model);
  };
  if (!plan.model.empty() && plan.model != m.name)
    conflict("model", "the plan was made for model '" + plan.model + "', not '" + m.name + "'",
             "the model compiled here is '" + m.name + "'");
  if (m.train.globalBatch > 0 && plan.globalBatch != m.train.globalBatch)
    conflict("global_batch",
             fmt::format("the plan's global batch ({}) replaces the model's ({})", plan.globalBatch,
                         m.train.globalBatch),
             fmt::format("model '{}' trains with global_batch = {}", m.name, m.train.globalBatch));
  if (plan.seqLen > 0 && seqLen > 0 && plan.seqLen != seqLen)
    conflict("seq_len",
             fmt::format("the plan was tuned for sequences of {} tokens; priced again for the "
                         "model's {}",
                         plan.seqLen, seqLen),
             fmt::format("model '{}' trains with seq_len = {}", m.name, seqLen));
  if (!plan.dtype.empty() && plan.dtype != dtype)
    conflict("dtype",
             fmt::format("the plan was tuned for {} training; priced again for the model's {}",
                         plan.dtype, dtype),
             fmt::format("model '{}' trains with dtype = {}", m.name, dtype));
}

/// Reads the plan file of --plan; `locations` receives where it says what.
std::optional<Plan> readPlan(const Module &m, const std::string &path, DiagnosticEngine &diag,
                             PlanLocations *locations = nullptr) {
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> buf = readInputFile(path, planInput, error);
  if (!buf) {
    diag.error({}, error);
    return std::nullopt;
  }
  unsigned id = diag.sourceMgr().AddNewSourceBuffer(std::move(buf), llvm::SMLoc());
  PlanLocations own;
  PlanLocations &where = locations ? *locations : own;
  auto plan = loadPlan(id, diag, &where);
  if (plan)
    warnOfConflicts(*plan, where, m, diag);
  return plan;
}

/// Whether the plan fits the model and cluster; if not, says why at the
/// plan key at fault (and, for a layer count, at the model's declaration).
bool planFitsModel(const Plan &plan, const PlanLocations &where, const Module &m,
                   const ModelProfile &model, const Cluster &cluster, DiagnosticEngine &diag) {
  std::optional<PlanProblem> bad = planProblem(plan, model, cluster);
  if (!bad)
    return true;
  diag.error(where.of(bad->stage, bad->key), "plan: " + bad->message);
  if (bad->aboutModelLayers && m.loc.isValid())
    diag.note(m.loc, fmt::format("model '{}' has {} layers", m.name, model.numLayers));
  return false;
}

/// The cluster to tune for or price a plan on: --cluster, else the train
/// section's `cluster`, else the plan file's when it names a preset. Says
/// what to add when none applies (`required`), else returns "".
std::optional<std::string> chooseCluster(const Module &m, const PlanActionOptions &opts,
                                         const Plan *plan, bool required, DiagnosticEngine &diag) {
  if (!opts.cluster.empty())
    return opts.cluster;
  const std::vector<std::string> presets = listClusterPresets(opts.presetDirs);
  auto isPreset = [&](const std::string &name) {
    return std::find(presets.begin(), presets.end(), name) != presets.end();
  };
  const std::string presetList = fmt::format("{}", fmt::join(presets, ", "));
  if (const std::string &named = m.train.cluster; !named.empty()) {
    if (namesClusterFile(named) ? llvm::sys::fs::is_regular_file(named) : isPreset(named))
      return named;
    diag.error(m.train.clusterLoc,
               namesClusterFile(named)
                   ? fmt::format("no cluster file '{}'", named)
                   : fmt::format("unknown cluster preset '{}' (presets: {})", named, presetList));
    return std::nullopt;
  }
  if (plan && isPreset(plan->cluster))
    return plan->cluster;
  if (!required)
    return std::string();
  // Nothing named: the machine mistc runs on, its CPU cores as ranks.
  if (isPreset(hostClusterName) && opts.output != Emit::ProfileShapes) {
    llvm::errs() << fmt::format("mistc: no cluster named: planning for this machine's CPU cores "
                                "(preset {}; --cluster NAME or `cluster = \"NAME\"` in the train "
                                "section for another: {})\n",
                                hostClusterName, presetList);
    return std::string(hostClusterName);
  }
  const std::string needs =
      opts.output == Emit::ProfileShapes
          ? "--plan (the plan's stages) or a cluster (every stage shape the tuner evaluates)"
          : fmt::format("a cluster to {}", plan ? "price the plan on" : "tune for");
  diag.error({}, fmt::format("--emit={} needs {}: pass --cluster NAME or FILE, or add `cluster = "
                             "\"NAME\"` to the train section of the .mist file (presets: {})",
                             emitName(opts.output), needs, presetList));
  return std::nullopt;
}

/// Writes the tuned plan to `path` (--plan-out, or beside a trainer), or an
/// export's projection (--projected-plan).
bool writePlanFile(const Plan &plan, const std::string &path, DiagnosticEngine &diag,
                   const char *what) {
  OutputFile file(path, "the plan", diag);
  if (file.failed())
    return false;
  writePlan(plan, file.os());
  if (!file.commit())
    return false;
  llvm::errs() << "mistc: " << what << " written to " << path << "\n";
  return true;
}

std::string shapeList(const std::vector<std::pair<int, int>> &shapes) {
  std::string s;
  for (auto [b, tp] : shapes)
    s += fmt::format("{}({}, {})", s.empty() ? "" : " ", b, tp);
  return s;
}

/// --emit=profile-shapes: the measured-op lookups at the plan's stage
/// shapes (checked against the cluster when one is given), or at every
/// stage shape the tuner would evaluate on the cluster.
int emitProfileShapes(const Module &m, const PlanActionOptions &opts, DiagnosticEngine &diag,
                      llvm::raw_ostream &out) {
  // With a plan, a cluster is optional (its stages are checked against it).
  auto clusterArg = chooseCluster(m, opts, nullptr, opts.planPath.empty(), diag);
  if (!clusterArg)
    return 1;
  std::optional<Cluster> cluster;
  if (!clusterArg->empty() &&
      !(cluster = loadClusterByName(*clusterArg, opts.nodes, opts.presetDirs, diag)))
    return 1;
  auto model = ModelProfile::build(m, diag);
  if (!model)
    return 1;
  std::vector<std::pair<int, int>> shapes;
  std::vector<std::string> comments;
  if (!opts.planPath.empty()) {
    PlanLocations where;
    auto plan = readPlan(m, opts.planPath, diag, &where);
    if (!plan)
      return 1;
    if (cluster && !planFitsModel(*plan, where, m, *model, *cluster, diag))
      return 1;
    for (size_t i = 0; i < plan->stages.size(); ++i) {
      const StagePlan &st = plan->stages[i];
      if (auto bad = model->violatedAssumption(st.tp)) {
        diag.error({}, fmt::format("plan: stage {}: tp = {} breaks the model's assumption {}", i,
                                   st.tp, *bad));
        return 1;
      }
      std::pair<int, int> shape{st.microBatch, st.tp};
      if (std::find(shapes.begin(), shapes.end(), shape) == shapes.end())
        shapes.push_back(shape);
    }
    std::sort(shapes.begin(), shapes.end());
    comments.push_back(fmt::format("model {}, the stages of plan {}", m.name, opts.planPath));
  } else {
    if (model->globalBatch <= 0) {
      diag.error({}, "the global batch is not set: add 'global_batch = N' to the train section "
                     "or pass --global-batch");
      return 1;
    }
    shapes = tunerStageShapes(*model, *cluster, model->globalBatch, opts.tuner);
    if (shapes.empty()) {
      diag.error({}, fmt::format("the tuner evaluates no stage shape of model '{}' on cluster "
                                 "'{}' (no tp degree divides the model, or no data-parallel "
                                 "degree splits the global batch {})",
                                 m.name, cluster->name, model->globalBatch));
      return 1;
    }
    comments.push_back(fmt::format("model {}, every stage shape the tuner evaluates on cluster {} "
                                   "({} GPUs, --space={}, global batch {})",
                                   m.name, cluster->name, cluster->totalGpus(),
                                   spaceLevelName(opts.tuner.space.level), model->globalBatch));
  }
  comments.push_back("(micro-batch, tp): " + shapeList(shapes));
  // What the ops compute in: mist-profile-cpu times them so (its --dtype).
  comments.push_back(fmt::format("dtype {}", dtypeName(m.train.dtype).str()));
  auto entries = collectProfileShapes(m, *model, shapes, diag);
  if (!entries)
    return 1;
  writeProfileShapes(*entries, comments, out);
  return 0;
}

} // namespace

namespace {

/// A plan with what it was priced with: the model's numbers and the cluster.
struct PricedPlan {
  Plan plan;
  PipelineEstimate estimate;
  Cluster cluster;
  ModelProfile model;
  bool tuned = false;  ///< tuned by this run (else --plan's)
  PlanLocations where; ///< where --plan's file sets each key (empty when tuned)
};

/// --plan priced on its cluster, or a plan tuned for the cluster (and
/// written to --plan-out); nullopt after errors.
std::optional<PricedPlan> planFor(const Module &m, const PlanActionOptions &opts,
                                  DiagnosticEngine &diag) {
  std::optional<Plan> given;
  PlanLocations where;
  if (!opts.planPath.empty() && !(given = readPlan(m, opts.planPath, diag, &where)))
    return std::nullopt;
  auto clusterArg = chooseCluster(m, opts, given ? &*given : nullptr, /*required=*/true, diag);
  if (!clusterArg)
    return std::nullopt;
  auto cluster = loadClusterByName(*clusterArg, opts.nodes, opts.presetDirs, diag);
  auto model = cluster ? ModelProfile::build(m, diag) : std::nullopt;
  if (!model)
    return std::nullopt;
  if (given) {
    if (!planFitsModel(*given, where, m, *model, *cluster, diag))
      return std::nullopt;
    auto estimate = estimatePlan(*given, *model, *cluster, diag);
    if (!estimate)
      return std::nullopt;
    return PricedPlan{*given, *estimate, *cluster, *model, false, std::move(where)};
  }
  auto tuned = tune(*model, *cluster, model->globalBatch, opts.tuner, diag);
  if (!tuned)
    return std::nullopt;
  llvm::errs() << fmt::format("mistc: tuned in {:.2f} s: {} strategies scored in {} stage "
                              "contexts, {} MILPs\n",
                              tuned->stats.seconds, tuned->stats.evaluations, tuned->stats.contexts,
                              tuned->stats.milps);
  // What the plan was proven for, so a later use with other settings is told.
  tuned->plan.seqLen = int(model->seqLen);
  tuned->plan.dtype = dtypeName(m.train.dtype).str();
  if (!opts.planOut.empty() && !writePlanFile(tuned->plan, opts.planOut, diag))
    return std::nullopt;
  return PricedPlan{tuned->plan, tuned->estimate, *cluster, *model, true, PlanLocations{}};
}

/// --emit=trainer: train.cu, its header naming the plan and the prediction.
bool writeTrainer(const Module &m, const PricedPlan &p, const PlanActionOptions &opts,
                  DiagnosticEngine &diag, llvm::raw_ostream &out) {
  TrainerSource src = opts.trainer;
  src.modelFlopsPerSample = p.model.modelFlopsPerSample;
  src.deviceName = p.cluster.device.name;
  src.devicePeakTflops = p.cluster.device.peakTflops;
  src.planFile = p.tuned ? opts.planOut : opts.planPath;
  src.planTuned = p.tuned;
  src.clusterName = p.cluster.name;
  src.gpusPerNode = p.cluster.gpusPerNode;
  src.tpAcrossNodes = p.cluster.tpAcrossNodes;
  src.predictedIterationSeconds = p.estimate.iterationSeconds;
  return emitTrainer(m, p.plan, src, diag, out);
}

/// --emit=lowered: one listing per distinct stage shape (micro-batch, tp).
bool writeLowered(const Module &m, const Plan &plan, DiagnosticEngine &diag,
                  llvm::raw_ostream &out) {
  std::vector<std::pair<int, int>> done;
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    std::pair<int, int> shape{plan.stages[i].microBatch, plan.stages[i].tp};
    if (std::find(done.begin(), done.end(), shape) != done.end())
      continue;
    done.push_back(shape);
    auto lowered = lowerForStage(m, shape.first, shape.second, diag);
    if (!lowered)
      return false;
    out << fmt::format("{}stage {}: ", i ? "\n" : "", i);
    printLowered(*lowered, out);
  }
  return true;
}

/// Writes what --emit asks for of a priced plan.
bool writeOutput(Module &m, const PricedPlan &p, const PlanActionOptions &opts,
                 DiagnosticEngine &diag, llvm::raw_ostream &out) {
  switch (opts.output) {
  case Emit::Trainer:
  case Emit::Schedule:
  case Emit::Timeline:
  case Emit::TimelineSvg:
  case Emit::Lowered:
    if (p.plan.virtualStages > 1 &&
        (opts.output == Emit::Timeline || opts.output == Emit::TimelineSvg)) {
      diag.error(p.where.of(-1, "virtual_stages"),
                 fmt::format("the timeline draws plain 1F1B (one chunk per stage): a plan with "
                             "virtual_stages = {} is priced (--emit=report), listed "
                             "(--emit=schedule), run (--emit=trainer) and exported, not drawn",
                             p.plan.virtualStages));
      return false;
    }
    if (!p.plan.overlapGradReduce) {
      diag.error(p.where.of(-1, "overlap_grad_reduce"),
                 "the trainer and its schedule reduce gradients beside the last backward: a "
                 "plan with overlap_grad_reduce = false is priced (--emit=report) and exported "
                 "(--emit=megatron, deepspeed), not run");
      return false;
    }
    if (opts.output != Emit::Trainer && opts.output != Emit::Lowered)
      break; // the schedule and its timeline are the same with either
    if (p.plan.tpCommOverlap) {
      diag.error(p.where.of(-1, "tp_comm_overlap"),
                 "the trainer runs each tp collective after the GEMM before it: a plan with "
                 "tp_comm_overlap is priced (--emit=report) and exported (--emit=megatron), not "
                 "run; without it the plan runs with sequence parallelism");
      return false;
    }
    // Its trainer runs the module with the activations split along the tokens.
    if (p.plan.sequenceParallel && !applySequenceParallel(m, diag))
      return false;
    break;
  default:
    break;
  }
  switch (opts.output) {
  case Emit::Plan:
    writePlan(p.plan, out);
    printPlanSummary(p.plan, p.estimate, p.cluster, p.model,
                     opts.summaryToStdout ? llvm::outs() : llvm::errs());
    return true;
  case Emit::Report:
    printReport(p.plan, p.estimate, p.cluster, p.model, out);
    return true;
  case Emit::Schedule:
    printSchedule(p.plan, out);
    return true;
  case Emit::TimelineSvg:
    writeTimelineSvg(p.plan, p.estimate, out);
    return true;
  case Emit::Timeline: {
    double simulated = writeTimeline(p.plan, p.estimate, out);
    llvm::errs() << fmt::format("mistc: timeline of one iteration: {:.4f} s simulated, {:.4f} s "
                                "by the pipeline formula\n",
                                simulated, p.estimate.iterationSeconds);
    return true;
  }
  case Emit::Trainer:
    return writeTrainer(m, p, opts, diag, out);
  case Emit::Lowered:
    return writeLowered(m, p.plan, diag, out);
  case Emit::Megatron:
  case Emit::DeepSpeed:
  case Emit::TorchTitan:
    return exportPlan(m, p.plan, p.estimate, p.cluster, p.model, opts, diag, out);
  case Emit::ProfileShapes: // runPlanActions writes it without a plan
  case Emit::AST:           // the driver writes these itself
  case Emit::IR:
  case Emit::CostedIR:
  case Emit::Summary:
  case Emit::HuggingFace:
  case Emit::Checkpoint:
    return true;
  }
  return true;
}

} // namespace

int mist::runPlanActions(Module &m, const PlanActionOptions &opts, DiagnosticEngine &diag,
                         llvm::raw_ostream &out) {
  if (opts.output == Emit::ProfileShapes)
    return emitProfileShapes(m, opts, diag, out);
  std::optional<PricedPlan> p = planFor(m, opts, diag);
  if (!p || !writeOutput(m, *p, opts, diag, out))
    return 1;
  if (!p->estimate.fits)
    diag.warning({}, "the plan does not fit in device memory on some stage");
  return 0;
}
