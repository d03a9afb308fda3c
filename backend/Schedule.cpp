//===- Schedule.cpp - The per-stage step sequence a plan implies ----------===//
#include "backend/Schedule.h"

#include <algorithm>
#include <fmt/format.h>

using namespace mist;

std::vector<std::pair<int, bool>> mist::oneFOneB(int stage, int stages, int gradAccum) {
  std::vector<std::pair<int, bool>> order;
  int warm = std::min(stages - stage - 1, gradAccum), f = 0, b = 0;
  for (; f < warm; ++f)
    order.push_back({f, true});
  while (f < gradAccum) {
    order.push_back({f++, true});
    order.push_back({b++, false});
  }
  while (b < gradAccum)
    order.push_back({b++, false});
  return order;
}

const char *mist::scheduleStreamName(ScheduleStream s) {
  switch (s) {
  case ScheduleStream::Compute:
    return "compute";
  case ScheduleStream::G2G:
    return "gpu<->gpu";
  case ScheduleStream::H2D:
    return "host->gpu";
  case ScheduleStream::D2H:
    return "gpu->host";
  }
  return "?";
}

const char *mist::phaseKindName(PhaseKind p) {
  switch (p) {
  case PhaseKind::FirstForward:
    return "first forward (micro-batch 0)";
  case PhaseKind::Forward:
    return "forward (micro-batches 1..G-1)";
  case PhaseKind::Backward:
    return "backward (micro-batches 0..G-2)";
  case PhaseKind::LastBackward:
    return "last backward (micro-batch G-1)";
  }
  return "?";
}

PhaseKind StageSchedule::phaseOf(size_t k, int gradAccum) const {
  auto [mb, forward] = order[k];
  if (forward)
    return mb == 0 ? PhaseKind::FirstForward : PhaseKind::Forward;
  return mb == gradAccum - 1 ? PhaseKind::LastBackward : PhaseKind::Backward;
}

namespace {

std::string share(double ratio) { return fmt::format("{:g}%", ratio * 100); }

/// The steps of one phase kind, in issue order.
std::vector<ScheduleStep> phaseSteps(const Plan &plan, int i, PhaseKind kind) {
  const StagePlan &st = plan.stages[i];
  const int S = static_cast<int>(plan.stages.size());
  const bool first = i == 0, last = i == S - 1, multiDp = st.dp > 1;
  const bool forward = kind == PhaseKind::FirstForward || kind == PhaseKind::Forward;
  const OffloadRatios &o = st.offload;
  const ZeroFlags &z = st.zero;
  const int firstCkpt = st.lastLayer - st.ckptLayers + 1;
  const std::string tpNote =
      st.tp > 1 ? fmt::format(" (tp all-reduces inside, over {} ranks)", st.tp) : "";
  std::vector<ScheduleStep> steps;
  auto add = [&](ScheduleStream s, int layer, std::string what) {
    steps.push_back({s, layer, std::move(what)});
  };

  if (forward) {
    if (first && kind == PhaseKind::FirstForward)
      add(ScheduleStream::Compute, -1, "AdamW step of the pre weights (embeddings)");
    if (last && kind == PhaseKind::FirstForward)
      add(ScheduleStream::Compute, -1, "AdamW step of the post weights (final norm, head)");
    if (first)
      add(ScheduleStream::Compute, -1, "pre forward (embeddings)" + tpNote);
    else
      add(ScheduleStream::G2G, -1,
          fmt::format("receive the micro-batch's activations from stage {}", i - 1));
    for (int l = st.firstLayer; l <= st.lastLayer; ++l) {
      if (kind == PhaseKind::FirstForward) {
        // Last iteration's optimizer step, layer by layer, hidden behind this forward.
        if (o.optimizer > 0 || o.grads > 0)
          add(ScheduleStream::H2D, l,
              fmt::format("fetch the offloaded optimizer state ({}) and gradients ({})",
                          share(o.optimizer), share(o.grads)));
        add(ScheduleStream::Compute, l,
            std::string("AdamW step of the layer's ") +
                (z.optimizer && multiDp ? "shard" : "weights") + " (last iteration's gradients)");
        if (o.optimizer > 0 || o.weights > 0)
          add(ScheduleStream::D2H, l,
              fmt::format("write back the offloaded optimizer state ({}) and weights ({})",
                          share(o.optimizer), share(o.weights)));
        if (z.optimizer && !z.weights && multiDp)
          add(ScheduleStream::G2G, l, "all-gather the updated weight shards over dp (ZeRO-1)");
      }
      if (z.weights && multiDp)
        add(ScheduleStream::G2G, l,
            "all-gather the weights over dp (ZeRO-3; prefetched during the previous layer)");
      if (o.weights > 0)
        add(ScheduleStream::H2D, l,
            fmt::format("fetch the offloaded weights ({})", share(o.weights)));
      add(ScheduleStream::Compute, l,
          std::string("forward") + (l >= firstCkpt ? ", keeping only the layer's input" : "") +
              tpNote);
      if (o.activations > 0)
        add(ScheduleStream::D2H, l,
            fmt::format("swap out the saved activations ({})", share(o.activations)));
    }
    if (last)
      add(ScheduleStream::Compute, -1, "post forward (head and loss)" + tpNote);
    else
      add(ScheduleStream::G2G, -1, fmt::format("send the activations to stage {}", i + 1));
    return steps;
  }

  if (last)
    add(ScheduleStream::Compute, -1, "post backward (loss and head)" + tpNote);
  else
    add(ScheduleStream::G2G, -1, fmt::format("receive the output gradients from stage {}", i + 1));
  for (int l = st.lastLayer; l >= st.firstLayer; --l) {
    if (z.weights && multiDp)
      add(ScheduleStream::G2G, l, "all-gather the weights over dp again (ZeRO-3)");
    if (o.weights > 0)
      add(ScheduleStream::H2D, l,
          fmt::format("fetch the offloaded weights ({})", share(o.weights)));
    if (o.activations > 0)
      add(ScheduleStream::H2D, l,
          fmt::format("swap in the saved activations ({})", share(o.activations)));
    if (l >= firstCkpt)
      add(ScheduleStream::Compute, l, "recompute the forward from the saved input" + tpNote);
    add(ScheduleStream::Compute, l, "backward, accumulating the weight gradients" + tpNote);
    if (o.grads > 0) {
      if (plan.gradAccum > 1)
        add(ScheduleStream::H2D, l,
            fmt::format("fetch the offloaded gradient accumulators ({})", share(o.grads)));
      add(ScheduleStream::D2H, l,
          fmt::format("write back the offloaded gradients ({})", share(o.grads)));
    }
    if (!multiDp)
      continue;
    if (kind == PhaseKind::LastBackward)
      add(ScheduleStream::G2G, l,
          z.grads || z.optimizer
              ? "reduce-scatter the gradients over dp (each rank keeps its shard)"
              : "all-reduce the gradients over dp");
    else if (z.grads)
      add(ScheduleStream::G2G, l,
          "reduce-scatter the gradients over dp (ZeRO-2: no full buffer kept)");
  }
  if (first) {
    add(ScheduleStream::Compute, -1, "pre backward (embeddings)" + tpNote);
    if (kind == PhaseKind::LastBackward && multiDp)
      add(ScheduleStream::G2G, -1, "all-reduce the pre gradients over dp");
  } else {
    add(ScheduleStream::G2G, -1, fmt::format("send the input gradients to stage {}", i - 1));
  }
  if (last && kind == PhaseKind::LastBackward && multiDp)
    add(ScheduleStream::G2G, -1, "all-reduce the post gradients over dp");
  return steps;
}

std::string orderText(const std::vector<std::pair<int, bool>> &order) {
  auto item = [](const std::pair<int, bool> &e) {
    return fmt::format("{}{}", e.second ? 'F' : 'B', e.first);
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

StageSchedule mist::buildStageSchedule(const Plan &plan, int stage) {
  StageSchedule s;
  s.stage = stage;
  const int S = static_cast<int>(plan.stages.size());
  s.order = oneFOneB(stage, S, plan.gradAccum);
  for (PhaseKind k :
       {PhaseKind::FirstForward, PhaseKind::Forward, PhaseKind::Backward, PhaseKind::LastBackward})
    s.phases[static_cast<int>(k)] = phaseSteps(plan, stage, k);
  return s;
}

void mist::printSchedule(const Plan &plan, llvm::raw_ostream &os) {
  const int S = static_cast<int>(plan.stages.size()), G = plan.gradAccum;
  os << fmt::format("schedule of {}: {} stage{}, G = {} micro-batches per iteration, 1F1B\n",
                    plan.model.empty() ? "the plan" : plan.model, S, S == 1 ? "" : "s", G);
  for (int i = 0; i < S; ++i) {
    const StagePlan &st = plan.stages[i];
    StageSchedule sch = buildStageSchedule(plan, i);
    os << fmt::format("\nstage {}: layers {}-{}, mesh {}x{}, micro-batch {}, dp {}, tp {}\n", i,
                      st.firstLayer, st.lastLayer, st.meshNodes, st.meshGpusPerNode, st.microBatch,
                      st.dp, st.tp);
    os << fmt::format("  order: {}\n", orderText(sch.order));
    // Phase kinds that never run (G = 1 has no stable micro-batch) are left out.
    bool runs[4] = {false, false, false, false};
    for (size_t k = 0; k < sch.order.size(); ++k)
      runs[static_cast<int>(sch.phaseOf(k, G))] = true;
    for (int p = 0; p < 4; ++p) {
      if (!runs[p])
        continue;
      os << fmt::format("  {}:\n", phaseKindName(static_cast<PhaseKind>(p)));
      for (const ScheduleStep &step : sch.phases[p])
        os << fmt::format("    [{:<9}] {:<9} {}\n", scheduleStreamName(step.stream),
                          step.layer < 0 ? "stage" : fmt::format("layer {}", step.layer),
                          step.what);
    }
  }
}
