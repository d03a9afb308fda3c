//===- PlanActions.cpp - Tune, report and trace plans for a cluster -------===//
#include "frontend/PlanActions.h"

#include "backend/ExportProjection.h"
#include "backend/Lowering.h"
#include "backend/PlanWriter.h"
#include "backend/Report.h"
#include "backend/Schedule.h"
#include "backend/Timeline.h"
#include "frontend/ClusterLoader.h"
#include "frontend/PlanLoader.h"
#include "llvm/Support/MemoryBuffer.h"
#include <algorithm>
#include <fmt/format.h>

using namespace mist;

namespace {

/// Projects the plan onto what the target framework can run, prices the
/// projection with the same model, says what changed on stderr and writes
/// the target's configuration.
bool exportPlan(const Module &m, const Plan &plan, const PipelineEstimate &estimate,
                const Cluster &cluster, const ModelProfile &model, PlanOutput output,
                DiagnosticEngine &diag, llvm::raw_ostream &out) {
  ExportTarget target = output == PlanOutput::Megatron    ? ExportTarget::Megatron
                        : output == PlanOutput::DeepSpeed ? ExportTarget::DeepSpeed
                                                          : ExportTarget::TorchTitan;
  ExportProjection projected = projectForExport(plan, target, cluster.gpusPerNode);
  auto cost = estimatePlan(projected.plan, model, cluster, diag);
  if (!cost)
    return false;
  llvm::raw_ostream &err = llvm::errs();
  if (projected.exact()) {
    err << fmt::format("mistc: {} runs the plan as tuned: {:.4f} s per iteration predicted\n",
                       exportTargetName(target), estimate.iterationSeconds);
  } else {
    err << fmt::format("mistc: {} cannot express the plan; writing the closest plan it can run:\n",
                       exportTargetName(target));
    for (const std::string &n : projected.notes)
      err << "mistc:   - " << n << "\n";
    err << fmt::format("mistc: predicted iteration: the plan {:.4f} s, the {} projection {:.4f} s "
                       "({:+.1f}%){}\n",
                       estimate.iterationSeconds, exportTargetName(target), cost->iterationSeconds,
                       100 * (cost->iterationSeconds / estimate.iterationSeconds - 1),
                       cost->fits ? "" : "; the projection does NOT fit in device memory");
  }
  if (target == ExportTarget::DeepSpeed && projected.plan.stages.size() > 1)
    err << fmt::format("mistc: DeepSpeed builds the pipeline in code: "
                       "PipelineModule(layers, num_stages={}, partition_method=\"uniform\")\n",
                       projected.plan.stages.size());
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

} // namespace

int mist::runPlanActions(const Module &m, const PlanActionOptions &opts, DiagnosticEngine &diag,
                         llvm::raw_ostream &out) {
  auto cluster = loadClusterByName(opts.cluster, opts.nodes, opts.presetDirs, diag);
  if (!cluster)
    return 1;
  auto model = ModelProfile::build(m, diag);
  if (!model)
    return 1;
  Plan plan;
  std::optional<PipelineEstimate> estimate;
  if (!opts.planPath.empty()) {
    auto buf = llvm::MemoryBuffer::getFile(opts.planPath);
    if (!buf) {
      diag.error({}, "cannot read plan '" + opts.planPath + "': " + buf.getError().message());
      return 1;
    }
    unsigned id = diag.sourceMgr().AddNewSourceBuffer(std::move(*buf), llvm::SMLoc());
    auto loaded = loadPlan(id, diag);
    if (!loaded)
      return 1;
    plan = *loaded;
    if (!plan.model.empty() && plan.model != m.name)
      diag.warning({}, "the plan was made for model '" + plan.model + "', not '" + m.name + "'");
    estimate = estimatePlan(plan, *model, *cluster, diag);
    if (!estimate)
      return 1;
  } else {
    auto tuned = tune(*model, *cluster, model->globalBatch, opts.tuner, diag);
    if (!tuned)
      return 1;
    plan = tuned->plan;
    estimate = tuned->estimate;
    llvm::errs() << fmt::format("mistc: tuned in {:.2f} s: {} strategies scored in {} stage "
                                "contexts, {} MILPs\n",
                                tuned->stats.seconds, tuned->stats.evaluations,
                                tuned->stats.contexts, tuned->stats.milps);
  }
  switch (opts.output) {
  case PlanOutput::Plan:
    writePlan(plan, out);
    printPlanSummary(plan, *estimate, *cluster, *model,
                     opts.summaryToStdout ? llvm::outs() : llvm::errs());
    break;
  case PlanOutput::Report:
    printReport(plan, *estimate, *cluster, *model, out);
    break;
  case PlanOutput::Schedule:
    printSchedule(plan, out);
    break;
  case PlanOutput::TimelineSvg:
    writeTimelineSvg(plan, *estimate, out);
    break;
  case PlanOutput::Trainer: {
    TrainerSource src = opts.trainer;
    src.modelFlopsPerSample = model->modelFlopsPerSample;
    src.deviceName = cluster->device.name;
    src.devicePeakTflops = cluster->device.peakTflops;
    if (!emitTrainer(m, plan, src, diag, out))
      return 1;
    break;
  }
  case PlanOutput::Lowered: {
    // One listing per distinct stage shape (micro-batch, tp).
    std::vector<std::pair<int, int>> done;
    for (size_t i = 0; i < plan.stages.size(); ++i) {
      std::pair<int, int> shape{plan.stages[i].microBatch, plan.stages[i].tp};
      if (std::find(done.begin(), done.end(), shape) != done.end())
        continue;
      done.push_back(shape);
      auto lowered = lowerForStage(m, shape.first, shape.second, diag);
      if (!lowered)
        return 1;
      out << fmt::format("{}stage {}: ", i ? "\n" : "", i);
      printLowered(*lowered, out);
    }
    break;
  }
  case PlanOutput::Megatron:
  case PlanOutput::DeepSpeed:
  case PlanOutput::TorchTitan:
    if (!exportPlan(m, plan, *estimate, *cluster, *model, opts.output, diag, out))
      return 1;
    break;
  case PlanOutput::Timeline: {
    double simulated = writeTimeline(plan, *estimate, out);
    llvm::errs() << fmt::format("mistc: timeline of one iteration: {:.4f} s simulated, {:.4f} s "
                                "by the pipeline formula\n",
                                simulated, estimate->iterationSeconds);
    break;
  }
  }
  if (!estimate->fits)
    diag.warning({}, "the plan does not fit in device memory on some stage");
  return 0;
}
