//===- PlanActions.cpp - Tune, report and trace plans for a cluster -------===//
#include "frontend/PlanActions.h"

#include "backend/PlanWriter.h"
#include "backend/Report.h"
#include "backend/Schedule.h"
#include "backend/Timeline.h"
#include "frontend/ClusterLoader.h"
#include "frontend/PlanLoader.h"
#include "llvm/Support/MemoryBuffer.h"
#include <fmt/format.h>

using namespace mist;

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
    printPlanSummary(plan, *estimate, *cluster, *model, opts.summaryToStdout ? llvm::outs() : llvm::errs());
    break;
  case PlanOutput::Report: printReport(plan, *estimate, *cluster, *model, out); break;
  case PlanOutput::Schedule: printSchedule(plan, out); break;
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
