//===- TrainerStageSchedule.cpp - A stage's steps as calls to the runtime -===//
#include "backend/TrainerStageSchedule.h"

#include <fmt/format.h>
#include <optional>
#include <string>

using namespace mist;

namespace {

std::string percent(double fraction) { return fmt::format("{:g}%", 100 * fraction); }

/// "dp 2 x tp 1" of a stage.
std::string split(const StagePlan &sp) { return fmt::format("dp {} x tp {}", sp.dp, sp.tp); }

/// One statement of a schedule with its comment, aligned.
void step(llvm::raw_ostream &os, const std::string &call, const std::string &why = "") {
  if (why.empty())
    os << "  " << call << "\n";
  else
    os << fmt::format("  {:<44} // {}\n", call, why);
}

/// A region whose weights a step names: `RegionKind::Layer, 3`.
struct Region {
  std::string kind;
  int layer;
};

/// Writes stage i's three functions; what their comments say follows from
/// the stage's knobs, worked out once here.
class StageScheduleWriter {
public:
  StageScheduleWriter(const Plan &plan, int i, llvm::raw_ostream &os)
      : plan(plan), i(i), sp(plan.stages[i]), os(os), first(i == 0),
        last(i + 1 == static_cast<int>(plan.stages.size())), zero1(sp.zero.optimizer && sp.dp > 1),
        zero2(zero1 && sp.zero.grads), zero3(zero2 && sp.zero.weights),
        movesWeights(zero3 || sp.offload.weights > 0),
        firstCheckpointed(sp.layers() - sp.ckptLayers) {
    acquireWhy = zero3 ? fmt::format("g2g: all-gather its ZeRO-3 slices over dp {}", sp.dp)
                 : sp.offload.weights > 0 ? fmt::format("h2d: swap in the {} kept in host memory",
                                                        percent(sp.offload.weights))
                                          : "wait for its last optimizer update";
    releaseWhy = zero3 ? "drop the gathered weights"
                 : sp.offload.weights > 0
                     ? fmt::format("d2h: swap {} out", percent(sp.offload.weights))
                     : "nothing to move";
  }

  void forward();
  void backward();
  void optimizer();

private:
  /// Weights that move between uses (ZeRO-3, weight offload) are brought in
  /// for the next region while this one computes: `ahead` names it, and it
  /// is prefetched right before this region's call.
  void prefetch(const std::optional<Region> &ahead) {
    if (movesWeights && ahead)
      step(os, fmt::format("r.prefetchWeights(RegionKind::{}, {});", ahead->kind, ahead->layer),
           zero3 ? "the next region's gather runs beside this one"
                 : "the next region's swap-in "
                   "runs beside this one");
  }
  /// A region's call between taking its weights and letting them go.
  void around(const char *region, int layer, const std::string &call, const std::string &why,
              const std::optional<Region> &ahead) {
    step(os, fmt::format("r.acquireWeights(RegionKind::{}, {});", region, layer), acquireWhy);
    prefetch(ahead);
    step(os, call, why);
    step(os, fmt::format("r.releaseWeights(RegionKind::{}, {});", region, layer), releaseWhy);
  }
  /// What a layer's reduceGradients does at the stage's ZeRO level.
  std::string reduceWhy() const {
    if (zero2)
      return "g2g: ZeRO-2 scattered them after its backward already";
    return fmt::format("g2g: last backward only: {} over dp {} beside the next region",
                       zero1 ? "reduce-scattered" : "all-reduced", sp.dp);
  }
  /// The stage's first or last layer, none when it has no layers.
  std::optional<Region> layerIfAny(int l) const {
    return sp.layers() > 0 ? std::optional<Region>(Region{"Layer", l}) : std::nullopt;
  }

  const Plan &plan;
  const int i;
  const StagePlan &sp;
  llvm::raw_ostream &os;
  const bool first, last;
  const bool zero1, zero2, zero3; ///< the ZeRO levels that shard anything (dp > 1)
  const bool movesWeights;
  const int firstCheckpointed; ///< the stage's checkpointed layers are the last ones
  std::string acquireWhy, releaseWhy;
};

void StageScheduleWriter::forward() {
  os << fmt::format("// Stage {}'s forward of micro-batch mb (layers {}-{}, {}).\n", i,
                    sp.firstLayer, sp.lastLayer, split(sp));
  os << fmt::format("void s{}_forward(StageRunner &r, int step, int mb) {{\n", i);
  step(os, "r.beginForward(mb);", "its activations get a slot of the stage's memory");
  if (first || last)
    step(os, "r.loadData(step, mb);",
         first && last ? "tokens and targets"
         : first       ? "tokens"
                       : "targets");
  if (first)
    around("Pre", 0, "r.forwardPre(mb);", "embeddings", layerIfAny(0));
  else
    step(os, "r.receiveActivations(mb);",
         fmt::format("g2g: from stage {} ({}){}", i - 1, split(plan.stages[i - 1]),
                     plan.stages[i - 1].dp == sp.dp ? "" : ", re-sliced"));
  for (int l = 0; l < sp.layers(); ++l) {
    std::optional<Region> ahead;
    if (l + 1 < sp.layers())
      ahead = Region{"Layer", l + 1};
    else if (last)
      ahead = Region{"Post", 0};
    around("Layer", l, fmt::format("r.forwardLayer({}, mb);", l),
           fmt::format("layer {}", sp.firstLayer + l), ahead);
    if (l >= firstCheckpointed)
      step(os, fmt::format("r.dropRecomputable({});", l), "checkpointed: keep only its input");
  }
  if (last)
    around("Post", 0, "r.forwardPost(step, mb);", "final norm, LM head, loss", std::nullopt);
  else
    step(os, "r.sendActivations(mb);",
         fmt::format("g2g: to stage {} ({})", i + 1, split(plan.stages[i + 1])));
  step(os, "r.stashActivations(mb);",
       sp.offload.activations > 0 ? fmt::format("kept for the backward; d2h: {} to host memory",
                                                percent(sp.offload.activations))
                                  : "kept in its slot for the backward");
  os << "}\n\n";
}

void StageScheduleWriter::backward() {
  os << fmt::format("// Stage {}'s backward of micro-batch mb.\n", i);
  os << fmt::format("void s{}_backward(StageRunner &r, int mb) {{\n", i);
  step(os, "r.unstashActivations(mb);",
       sp.offload.activations > 0 ? "h2d: the offloaded part comes back" : "");
  step(os, "r.clearGradients();");
  if (last)
    around("Post", 0, "r.backwardPost(mb);", "d loss / d x", layerIfAny(sp.layers() - 1));
  else
    step(os, "r.receiveGradients(mb);", fmt::format("g2g: from stage {}", i + 1));
  for (int l = sp.layers() - 1; l >= 0; --l) {
    step(os, fmt::format("r.acquireWeights(RegionKind::Layer, {});", l), acquireWhy);
    if (l > 0)
      prefetch(Region{"Layer", l - 1});
    else if (first)
      prefetch(Region{"Pre", 0});
    if (l >= firstCheckpointed)
      step(os, fmt::format("r.recomputeLayer({}, mb);", l), "checkpointed: forward again");
    step(os, fmt::format("r.backwardLayer({}, mb);", l),
         fmt::format("layer {}", sp.firstLayer + l));
    if (sp.dp > 1)
      step(os, fmt::format("r.reduceGradients(RegionKind::Layer, {}, mb);", l), reduceWhy());
    step(os, fmt::format("r.releaseWeights(RegionKind::Layer, {});", l), releaseWhy);
  }
  if (first) {
    around("Pre", 0, "r.backwardPre(mb);", "embedding gradients", std::nullopt);
    if (sp.dp > 1)
      step(os, "r.reduceGradients(RegionKind::Pre, 0, mb);",
           fmt::format("g2g: over dp {}, in the last backward", sp.dp));
  } else {
    step(os, "r.sendGradients(mb);", fmt::format("g2g: to stage {}", i - 1));
  }
  if (last && sp.dp > 1)
    step(os, "r.reduceGradients(RegionKind::Post, 0, mb);",
         fmt::format("g2g: over dp {}, in the last backward", sp.dp));
  step(os, "r.foldGradients();",
       (zero2 ? fmt::format("ZeRO-2: each region's gradients were reduce-scattered over dp {} "
                            "after its backward (g2g); the rest here",
                            sp.dp)
              : std::string("add into the step's gradient sums")) +
           (sp.offload.grads > 0
                ? fmt::format(" ({} of them in host memory)", percent(sp.offload.grads))
                : ""));
  os << "}\n\n";
}

void StageScheduleWriter::optimizer() {
  os << fmt::format("// Stage {}'s optimizer. A step's update runs in the next step's first "
                    "forward, each\n// region's just before its weights are wanted; this "
                    "runs what is left of it\n// before a checkpoint and after the last "
                    "step, in the order the forward reads them.\n",
                    i);
  if (zero1)
    os << fmt::format("// ZeRO-1: AdamW on this rank's slice, then {} over dp {}.\n",
                      zero3 ? "the slice is the weights" : "all-gather the weights", sp.dp);
  os << fmt::format("void s{}_optimizer(StageRunner &r, const AdamStep &a) {{\n", i);
  const std::string stateWhy =
      sp.offload.optimizer > 0 ? fmt::format("h2d/d2h: {} of the optimizer state in host memory",
                                             percent(sp.offload.optimizer))
                               : "";
  if (first)
    step(os, "r.optimizerStep(a, RegionKind::Pre, 0);", stateWhy);
  for (int l = 0; l < sp.layers(); ++l)
    step(os, fmt::format("r.optimizerStep(a, RegionKind::Layer, {});", l), stateWhy);
  if (last)
    step(os, "r.optimizerStep(a, RegionKind::Post, 0);", stateWhy);
  os << "}\n\n";
}

} // namespace

void mist::emitStageSchedule(const Plan &plan, int i, llvm::raw_ostream &os) {
  StageScheduleWriter writer(plan, i, os);
  writer.forward();
  writer.backward();
  writer.optimizer();
}
