//===- Report.cpp - Predicted figures of a plan ---------------------------===//
#include "backend/reports/Report.h"

#include "backend/reports/Timeline.h"

#include <cmath>
#include <fmt/format.h>

using namespace mist;

namespace {

double ms(double s) { return s * 1e3; }
double gib(double b) { return b / double(1ull << 30); }

/// TFLOP/s with one decimal, or three significant digits below 1 (a CPU
/// core's profile: 0.00177, not 0.0).
std::string tflops(double v, const char *big = "{:.1f}") {
  return v >= 1 || v == 0 ? fmt::format(fmt::runtime(big), v) : fmt::format("{:.3g}", v);
}

std::string flags(const ZeroFlags &z) {
  return fmt::format("{} (sharded: weights {}, grads {}, optimizer {})", z.name(),
                     z.weights ? "yes" : "no", z.grads ? "yes" : "no", z.optimizer ? "yes" : "no");
}

/// Time the compute stream spends waiting for transfers in a phase.
double exposed(const PhaseLoad &p) { return std::max(0.0, p.elapsed - p.busy[0] - p.tp); }

/// The busy time of each stream, the tp collectives, the exposed transfers
/// and the elapsed time, in each of the stage's four phases.
void printPhaseTable(const StageEstimate &e, llvm::raw_ostream &os) {
  os << fmt::format("  {:<22}{:>14}{:>14}{:>14}{:>14}\n", "busy (ms)", "fwd stable", "bwd stable",
                    "fwd first", "bwd last");
  const PhaseLoad *phases[] = {&e.fwdStable, &e.bwdStable, &e.fwdFirst, &e.bwdLast};
  const char *rows[] = {"compute", "gpu<->gpu (dp/zero)", "host->gpu", "gpu->host"};
  for (unsigned r = 0; r < numStreams; ++r) {
    os << fmt::format("  {:<22}", rows[r]);
    for (const PhaseLoad *p : phases)
      os << fmt::format("{:>14.3f}", ms(p->busy[r]));
    os << "\n";
  }
  os << fmt::format("  {:<22}", "tp collectives");
  for (const PhaseLoad *p : phases)
    os << fmt::format("{:>14.3f}", ms(p->tp));
  os << "\n" << fmt::format("  {:<22}", "exposed transfers");
  for (const PhaseLoad *p : phases)
    os << fmt::format("{:>14.3f}", ms(exposed(*p)));
  os << "\n" << fmt::format("  {:<22}", "elapsed");
  for (const PhaseLoad *p : phases)
    os << fmt::format("{:>14.3f}", ms(p->elapsed));
  os << "\n";
}

/// Each region's kernels per micro-batch and its AdamW step: what the
/// trainer's measured timeline (--trace) shows region by region
/// (bench/h100/compare-regions.py compares the two).
void printRegionTimes(const StageEstimate &e, const StagePlan &s, bool first, bool last,
                      llvm::raw_ostream &os) {
  const RegionTimes &r = e.regions;
  os << fmt::format("  {:<22}{:>14}{:>14}{:>14}\n", "regions (ms)", "forward", "backward",
                    "AdamW step");
  auto row = [&](const char *name, double fwd, double bwd, double step) {
    os << fmt::format("  {:<22}{:>14.3f}{:>14.3f}{:>14.3f}\n", name, ms(fwd), ms(bwd), ms(step));
  };
  if (first)
    row("pre", r.preFwd, r.preBwd, r.preOptimizer);
  if (s.layers() > 0)
    row("each layer", r.layerFwd, r.layerBwd, r.layerOptimizer);
  if (last)
    row("post", r.postFwd, r.postBwd, r.postOptimizer);
}

/// The stage's memory by kind, its peak against the usable device memory,
/// and the host memory it pins against its share.
void printStageMemory(const MemoryBreakdown &m, const Cluster &cluster, llvm::raw_ostream &os) {
  // Small stages (the tiny test models) in MiB, so the figures say something.
  const bool small = m.peak() < double(1 << 30);
  const double unit = small ? double(1 << 20) : double(1 << 30);
  os << fmt::format(
      "  memory ({}): weights {:.2f}, grads {:.2f}, optimizer {:.2f}, buffers {:.2f}, "
      "saved activations {:.2f}, transient {:.2f}\n",
      small ? "MiB" : "GiB", m.weights / unit, m.grads / unit, m.optimizer / unit, m.buffers / unit,
      m.savedActivations / unit, m.transient / unit);
  os << fmt::format("  peak {:.2f} {} (forward {:.2f}, backward {:.2f}) of {:.2f} GiB usable: {}\n",
                    m.peak() / unit, small ? "MiB" : "GiB", m.fwdPeak / unit, m.bwdPeak / unit,
                    gib(cluster.usableBytes()),
                    m.peak() <= cluster.usableBytes() ? "fits" : "DOES NOT FIT");
  if (m.host > 0) {
    double share = cluster.hostBytesPerGpu();
    os << (std::isfinite(share)
               ? fmt::format("  pinned host memory {:.2f} GiB of this GPU's {:.2f} GiB share: {}\n",
                             gib(m.host), gib(share), m.host <= share ? "fits" : "DOES NOT FIT")
               : fmt::format("  pinned host memory {:.2f} GiB (no host limit given)\n",
                             gib(m.host)));
  }
}

/// Stage i: its knobs, t and d, phase table and memory.
void printStage(size_t i, const StagePlan &s, const StageEstimate &e, size_t stages,
                const Cluster &cluster, llvm::raw_ostream &os) {
  os << fmt::format("\nstage {}: layers {}-{} ({}{}{}), mesh {}x{}, micro-batch {}, dp {}, tp {}\n",
                    i, s.firstLayer, s.lastLayer, s.layers(), i == 0 ? ", pre" : "",
                    i + 1 == stages ? ", post" : "", s.meshNodes, s.meshGpusPerNode, s.microBatch,
                    s.dp, s.tp);
  os << fmt::format("  zero: {}; checkpointed layers: {}; offload: weights {}, grads {}, "
                    "optimizer {}, activations {}\n",
                    flags(s.zero), s.ckptLayers, s.offload.weights, s.offload.grads,
                    s.offload.optimizer, s.offload.activations);
  os << fmt::format("  t = {:.3f} ms (stable forward+backward, incl. p2p {:.3f} ms), d = {:.3f} ms "
                    "(extra of the first forward and last backward)\n",
                    ms(e.t), ms(e.p2p), ms(e.d));
  printPhaseTable(e, os);
  printRegionTimes(e, s, i == 0, i + 1 == stages, os);
  printStageMemory(e.mem, cluster, os);
}

} // namespace

void mist::printReport(const Plan &plan, const PipelineEstimate &est, const Cluster &cluster,
                       const ModelProfile &model, llvm::raw_ostream &os) {
  int gpus = 0;
  for (const StagePlan &s : plan.stages)
    gpus += s.gpus();
  os << fmt::format("plan for {} on {} ({} x {} GPUs, {} used): global batch {}, {} micro-batches "
                    "per iteration, sequence {}\n",
                    model.modelName, cluster.name, cluster.nodes, cluster.gpusPerNode, gpus,
                    plan.globalBatch, plan.gradAccum, model.seqLen);
  if (plan.sequenceParallel)
    os << (plan.tpCommOverlap
               ? "tp with sequence parallelism and its collectives overlapped with the GEMMs "
                 "(tp collectives below: the time they add)\n"
               : "tp with sequence parallelism\n");
  if (plan.selectiveRecompute)
    os << "selective recomputation: the layers not checkpointed compute their norms and "
          "activation functions again before their backward\n";
  if (!plan.overlapGradReduce)
    os << "gradient reductions after the last backward, not beside it (overlap_grad_reduce: "
          "false)\n";
  for (size_t i = 0; i < est.stages.size(); ++i)
    printStage(i, plan.stages[i], est.stages[i], est.stages.size(), cluster, os);
  double peak = cluster.device.peakTflops;
  os << fmt::format("\npipeline: iteration {:.4f} s, {:.0f} tokens/s, {} model TFLOP/s per GPU",
                    est.iterationSeconds, est.tokensPerSecond, tflops(est.tflopsPerGpu));
  if (peak > 0)
    os << fmt::format(" ({:.1f}% of the {} TFLOP/s peak)", 100 * est.tflopsPerGpu / peak,
                      tflops(peak, "{:.0f}"));
  // The formula and the event simulation of --emit=timeline are two figures
  // for one iteration; say which is which (docs/perf-model.md, "Pipeline").
  if (plan.virtualStages > 1)
    os << fmt::format("\n  (interleaved 1F1B, {} chunks per stage, by the pipeline formula; the "
                      "event simulation of --emit=timeline replays plain 1F1B only)",
                      plan.virtualStages);
  else
    os << fmt::format("\n  (the pipeline formula the tuner minimizes; the event simulation of "
                      "--emit=timeline replays the same phase times in {:.4f} s)",
                      simulateTimeline(plan, est).seconds);
  os << "\n" << (est.fits ? "every stage fits in memory\n" : "some stage does not fit in memory\n");
}

void mist::printPlanSummary(const Plan &plan, const PipelineEstimate &est, const Cluster &cluster,
                            const ModelProfile &model, llvm::raw_ostream &os) {
  os << fmt::format("plan for {} on {}: global batch {}, G = {}, {} stage{}\n", model.modelName,
                    cluster.name, plan.globalBatch, plan.gradAccum, plan.stages.size(),
                    plan.stages.size() == 1 ? "" : "s");
  os << fmt::format(
      "  {:>5} {:>9} {:>6} {:>4} {:>4} {:>4} {:>6} {:>5} {:>23} {:>10} {:>10} {:>9}\n", "stage",
      "layers", "mesh", "b", "dp", "tp", "zero", "ckpt", "offload w/g/o/a", "t (ms)", "d (ms)",
      "peak GiB");
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    const StagePlan &s = plan.stages[i];
    const StageEstimate &e = est.stages[i];
    const std::string zero = s.zero.name();
    os << fmt::format(
        "  {:>5} {:>9} {:>6} {:>4} {:>4} {:>4} {:>6} {:>5} {:>23} {:>10.2f} {:>10.2f} "
        "{:>9.2f}\n",
        i, fmt::format("{}-{}", s.firstLayer, s.lastLayer),
        fmt::format("{}x{}", s.meshNodes, s.meshGpusPerNode), s.microBatch, s.dp, s.tp, zero,
        s.ckptLayers,
        fmt::format("{:g}/{:g}/{:g}/{:g}", s.offload.weights, s.offload.grads, s.offload.optimizer,
                    s.offload.activations),
        ms(e.t), ms(e.d), gib(e.mem.peak()));
  }
  os << fmt::format("  iteration {:.4f} s, {:.0f} tokens/s, {} model TFLOP/s per GPU\n",
                    est.iterationSeconds, est.tokensPerSecond, tflops(est.tflopsPerGpu));
}
