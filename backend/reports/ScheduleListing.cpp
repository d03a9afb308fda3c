//===- ScheduleListing.cpp - `mistc --emit=schedule` ----------------------===//
#include "backend/reports/ScheduleListing.h"

#include "schedule/Schedule.h"

#include <fmt/format.h>

using namespace mist;

namespace {

std::string share(double ratio) { return fmt::format("{:g}%", ratio * 100); }

} // namespace

std::string mist::describeStep(const Step &s, Phase phase, const StageSchedule &sch, int chunk) {
  const ScheduleKnobs &k = sch.chunks[size_t(chunk)].knobs;
  const int i = sch.stage, S = sch.knobs.stages;
  // Interleaved, the stages form a ring: the last stage's chunk feeds the
  // first stage's next one.
  const int prev = (i + S - 1) % S, next = (i + 1) % S;
  const OffloadRatios &o = k.offload;
  const std::string tpNote =
      k.tp > 1 ? fmt::format(" (tp all-reduces inside, over {} ranks)", k.tp) : "";
  switch (s.kind) {
  case StepKind::PreOptimizerStep:
    return "AdamW step of the pre weights (embeddings)";
  case StepKind::PostOptimizerStep:
    return "AdamW step of the post weights (final norm, head)";
  case StepKind::PreForward:
    return "pre forward (embeddings)" + tpNote;
  case StepKind::ReceiveActivations:
    return fmt::format("receive the micro-batch's activations from stage {}", prev);
  case StepKind::PostForward:
    return "post forward (head and loss)" + tpNote;
  case StepKind::SendActivations:
    return fmt::format("send the activations to stage {}", next);
  case StepKind::PostBackward:
    return "post backward (loss and head)" + tpNote;
  case StepKind::ReceiveGradients:
    return fmt::format("receive the output gradients from stage {}", next);
  case StepKind::PreBackward:
    return "pre backward (embeddings)" + tpNote;
  case StepKind::SendGradients:
    return fmt::format("send the input gradients to stage {}", prev);
  case StepKind::ReducePreGradients:
    return "all-reduce the pre gradients over dp";
  case StepKind::ReducePostGradients:
    return "all-reduce the post gradients over dp";
  case StepKind::FetchOptimizerState:
    return fmt::format("fetch the offloaded optimizer state ({}) and gradients ({})",
                       share(o.optimizer), share(o.grads));
  case StepKind::OptimizerStep:
    return std::string("AdamW step of the layer's ") +
           (k.zero.optimizer && k.dp > 1 ? "shard" : "weights") + " (last iteration's gradients)";
  case StepKind::WriteBackOptimizerState:
    return fmt::format("write back the offloaded optimizer state ({}) and weights ({})",
                       share(o.optimizer), share(o.weights));
  case StepKind::GatherUpdatedWeights:
    return "all-gather the updated weight shards over dp (ZeRO-1)";
  case StepKind::GatherWeights:
    return isForward(phase)
               ? "all-gather the weights over dp (ZeRO-3; prefetched during the previous layer)"
               : "all-gather the weights over dp again (ZeRO-3)";
  case StepKind::FetchWeights:
    return fmt::format("fetch the offloaded weights ({})", share(o.weights));
  case StepKind::Forward:
    return std::string("forward") +
           (k.checkpointed(s.layer) ? ", keeping only the layer's input" : "") + tpNote;
  case StepKind::SwapOutActivations:
    return fmt::format("swap out the saved activations ({})", share(o.activations));
  case StepKind::SwapInActivations:
    return fmt::format("swap in the saved activations ({})", share(o.activations));
  case StepKind::Recompute:
    return "recompute the forward from the saved input" + tpNote;
  case StepKind::Backward:
    return "backward, accumulating the weight gradients" + tpNote;
  case StepKind::FetchGradientAccumulators:
    return fmt::format("fetch the offloaded gradient accumulators ({})", share(o.grads));
  case StepKind::WriteBackGradients:
    return fmt::format("write back the offloaded gradients ({})", share(o.grads));
  case StepKind::ReduceScatterGradients:
    return phase == Phase::LastBackward
               ? "reduce-scatter the gradients over dp (each rank keeps its shard)"
               : "reduce-scatter the gradients over dp (ZeRO-2: no full buffer kept)";
  case StepKind::AllReduceGradients:
    return "all-reduce the gradients over dp";
  }
  return "?";
}

namespace {

/// "F0 F1 B0 ...", or with chunks "F0.0 F1.0 F0.1 ..." (micro-batch.chunk).
std::string orderText(const std::vector<ScheduledRun> &order, bool chunked) {
  auto item = [&](const ScheduledRun &r) {
    return chunked ? fmt::format("{}{}.{}", r.forward ? 'F' : 'B', r.mb, r.chunk)
                   : fmt::format("{}{}", r.forward ? 'F' : 'B', r.mb);
  };
  std::string text;
  const size_t n = order.size(), edge = 12;
  for (size_t k = 0; k < n; ++k) {
    if (n > 2 * edge && k == edge) {
      text += fmt::format(" ... ({} more) ...", n - 2 * edge);
      k = n - edge;
    }
    text += (text.empty() ? "" : " ") + item(order[k]);
  }
  return text;
}

} // namespace

void mist::printSchedule(const Plan &plan, llvm::raw_ostream &os) {
  const int S = static_cast<int>(plan.stages.size()), G = plan.gradAccum;
  const int v = std::max(1, plan.virtualStages);
  os << fmt::format("schedule of {}: {} stage{}, G = {} micro-batches per iteration, {}\n",
                    plan.model.empty() ? "the plan" : plan.model, S, S == 1 ? "" : "s", G,
                    v > 1 ? fmt::format("interleaved 1F1B with {} model chunks per stage", v)
                          : std::string("1F1B"));
  os << "(steps are numbered per phase; \"after\" names the steps of other streams a step "
        "waits for)\n";
  if (v > 1)
    os << "(the order names runs as micro-batch.chunk; chunk c of stage i is the model's chunk "
          "c x stages + i)\n";
  for (int i = 0; i < S; ++i) {
    const StagePlan &st = plan.stages[i];
    const StageSchedule sch = buildStageSchedule(plan, i);
    os << fmt::format("\nstage {}: {}, mesh {}x{}, micro-batch {}, dp {}, tp {}\n", i,
                      v > 1 ? fmt::format("{} layers", st.layers())
                            : fmt::format("layers {}-{}", st.firstLayer, st.lastLayer),
                      st.meshNodes, st.meshGpusPerNode, st.microBatch, st.dp, st.tp);
    os << fmt::format("  order: {}\n", orderText(sch.order, v > 1));
    for (int c = 0; c < v; ++c) {
      const ChunkSchedule &chunk = sch.chunks[size_t(c)];
      if (v > 1)
        os << fmt::format("  chunk {}: layers {}-{}\n", c, chunk.place.firstLayer,
                          chunk.place.firstLayer + chunk.place.layers - 1);
      for (unsigned p = 0; p < numPhases; ++p) {
        if (!sch.runs(Phase(p))) // G = 1 has no stable micro-batch
          continue;
        os << fmt::format("  {}:\n", phaseName(Phase(p)));
        const std::vector<Step> &steps = chunk.phases[p];
        for (size_t j = 0; j < steps.size(); ++j) {
          const Step &step = steps[j];
          std::string after;
          for (int a : step.after)
            after += fmt::format("{}{}", after.empty() ? "  (after " : ", ", a);
          os << fmt::format("   {:>3} [{:<9}] {:<9} {}{}\n", j, streamLabel(step.stream()),
                            step.layer < 0
                                ? "stage"
                                : fmt::format("layer {}", chunk.place.firstLayer + step.layer),
                            describeStep(step, Phase(p), sch, c), after.empty() ? "" : after + ")");
        }
      }
    }
  }
}
