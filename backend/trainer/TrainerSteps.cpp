//===- TrainerSteps.cpp - A stage's schedule as calls to the runtime ------===//
#include "backend/trainer/TrainerSteps.h"

#include "schedule/Schedule.h"

#include <climits>
#include <fmt/format.h>
#include <string>
#include <vector>

using namespace mist;

namespace {

std::string percent(double fraction) { return fmt::format("{:g}%", 100 * fraction); }

/// "dp 2 x tp 1" of a stage.
std::string split(const StagePlan &sp) { return fmt::format("dp {} x tp {}", sp.dp, sp.tp); }

/// The phase functions' names and what their comments say.
struct PhaseFunction {
  const char *name;
  const char *heading;
};

constexpr PhaseFunction phaseFunctions[numPhases] = {
    {"firstForward", "The first forward (micro-batch 0): it also runs the last step's optimizer "
                     "update,\n// each layer's before its weights are first wanted."},
    {"forward", "A forward of micro-batches 1..G-1."},
    {"backward", "A backward of micro-batches 0..G-2."},
    {"lastBackward", "The last backward (micro-batch G-1)."},
};

/// Writes one stage's phase functions and iteration.
class StepWriter {
public:
  StepWriter(const Plan &plan, int i, llvm::raw_ostream &os)
      : plan(plan), i(i), sp(plan.stages[size_t(i)]), os(os),
        schedule(buildStageSchedule(plan, i)) {}

  /// Chunk `chunk`'s function of phase kind `p`.
  void phase(Phase p, int chunk);
  void iteration();

private:
  /// A step as train.cu calls it: `layer` is how the call names its layer
  /// ("l + 1", "12"); empty for the stage's own steps.
  std::string call(const Step &s, const std::string &layer) const;
  /// What a step does, for its comment ("" for none).
  std::string why(const Step &s, Phase p) const;
  /// Whether train.cu calls the step: the fetch of offloaded gradient sums
  /// that the schedule places with the optimizer's is done by the runtime
  /// at the step's end, for the global gradient norm (docs/schedule.md).
  bool emitted(const Step &s) const {
    return s.kind != StepKind::FetchOptimizerState || sp.offload.optimizer > 0;
  }
  void line(int indent, const std::string &text, const std::string &comment) {
    const std::string pad(size_t(2 * indent), ' ');
    if (comment.empty())
      os << pad << text << "\n";
    else
      os << fmt::format("{}{:<{}} // {}\n", pad, text, std::max<size_t>(46 - pad.size(), 1),
                        comment);
  }
  /// The model's number of layer `l` of the chunk being written.
  int global(int l) const { return schedule.chunks[size_t(chunk)].place.firstLayer + l; }
  const ScheduleKnobs &knobs() const { return schedule.chunks[size_t(chunk)].knobs; }
  bool interleaved() const { return schedule.chunks.size() > 1; }
  /// "s0_forward", or interleaved "s0_c1_forward".
  std::string functionName(Phase p, int c) const;
  void interleavedIteration();

  const Plan &plan;
  const int i;
  const StagePlan &sp;
  llvm::raw_ostream &os;
  const StageSchedule schedule;
  int chunk = 0; ///< the chunk whose phase is being written
  /// The stages before and after this one; interleaved, the stages form a
  /// ring (the last stage's chunk feeds the first stage's next one).
  int prev() const { return (i + int(plan.stages.size()) - 1) % int(plan.stages.size()); }
  int next() const { return (i + 1) % int(plan.stages.size()); }
};

std::string StepWriter::functionName(Phase p, int c) const {
  const char *name = phaseFunctions[unsigned(p)].name;
  return interleaved() ? fmt::format("s{}_c{}_{}", i, c, name) : fmt::format("s{}_{}", i, name);
}

std::string StepWriter::call(const Step &s, const std::string &layer) const {
  switch (s.kind) {
  case StepKind::PreOptimizerStep:
    return "r.preOptimizerStep();";
  case StepKind::PostOptimizerStep:
    return "r.postOptimizerStep();";
  case StepKind::PreForward:
    return "r.preForward(mb);";
  case StepKind::ReceiveActivations:
    return "r.receiveActivations(mb);";
  case StepKind::PostForward:
    return "r.postForward(mb);";
  case StepKind::SendActivations:
    return "r.sendActivations(mb);";
  case StepKind::PostBackward:
    return "r.postBackward(mb);";
  case StepKind::ReceiveGradients:
    return "r.receiveGradients(mb);";
  case StepKind::PreBackward:
    return "r.preBackward(mb);";
  case StepKind::SendGradients:
    return "r.sendGradients(mb);";
  case StepKind::ReducePreGradients:
    return "r.reducePreGradients();";
  case StepKind::ReducePostGradients:
    return "r.reducePostGradients();";
  case StepKind::FetchOptimizerState:
    return fmt::format("r.fetchOptimizerState({});", layer);
  case StepKind::OptimizerStep:
    return fmt::format("r.optimizerStep({});", layer);
  case StepKind::WriteBackOptimizerState:
    return fmt::format("r.writeBackOptimizerState({});", layer);
  case StepKind::GatherUpdatedWeights:
    return fmt::format("r.gatherUpdatedWeights({});", layer);
  case StepKind::GatherWeights:
    return fmt::format("r.gatherWeights({});", layer);
  case StepKind::FetchWeights:
    return fmt::format("r.fetchWeights({});", layer);
  case StepKind::Forward:
    return fmt::format("r.forward({}, mb);", layer);
  case StepKind::SwapOutActivations:
    return fmt::format("r.swapOutActivations({}, mb);", layer);
  case StepKind::SwapInActivations:
    return fmt::format("r.swapInActivations({});", layer);
  case StepKind::Recompute:
    return fmt::format("r.recompute({}, mb);", layer);
  case StepKind::Backward:
    return fmt::format("r.backward({}, mb);", layer);
  case StepKind::FetchGradientAccumulators:
    return fmt::format("r.fetchGradientAccumulators({});", layer);
  case StepKind::WriteBackGradients:
    return fmt::format("r.writeBackGradients({});", layer);
  case StepKind::ReduceScatterGradients:
    return fmt::format("r.reduceScatterGradients({});", layer);
  case StepKind::AllReduceGradients:
    return fmt::format("r.allReduceGradients({});", layer);
  }
  return "";
}

std::string StepWriter::why(const Step &s, Phase p) const {
  const OffloadRatios &o = sp.offload;
  const bool zero2 = sp.zero.level() >= 2;
  switch (s.kind) {
  case StepKind::PreOptimizerStep:
    return "AdamW on the embeddings, when an update is pending";
  case StepKind::PostOptimizerStep:
    return "AdamW on the final norm and head, when pending";
  case StepKind::PreForward:
    return "embeddings";
  case StepKind::ReceiveActivations:
    return fmt::format("g2g: from stage {} ({}){}", prev(), split(plan.stages[size_t(prev())]),
                       plan.stages[size_t(prev())].dp == sp.dp ? "" : ", re-sliced");
  case StepKind::PostForward:
    return "final norm, LM head, loss";
  case StepKind::SendActivations:
    return fmt::format("g2g: to stage {} ({})", next(), split(plan.stages[size_t(next())]));
  case StepKind::PostBackward:
    return "loss, LM head and final norm";
  case StepKind::ReceiveGradients:
    return fmt::format("g2g: from stage {}", next());
  case StepKind::PreBackward:
    return "embedding gradients";
  case StepKind::SendGradients:
    return fmt::format("g2g: to stage {}", prev());
  case StepKind::ReducePreGradients:
  case StepKind::ReducePostGradients:
    return zero2 ? fmt::format("g2g: reduce-scatter into the slice over dp {}", sp.dp)
                 : fmt::format("g2g: {} over dp {}",
                               sp.zero.optimizer ? "reduce-scatter into the slice" : "all-reduce",
                               sp.dp);
  case StepKind::FetchOptimizerState:
    return fmt::format("h2d: {} of its optimizer state", percent(o.optimizer));
  case StepKind::OptimizerStep:
    return sp.zero.optimizer && sp.dp > 1 ? "AdamW on its slice, when an update is pending"
                                          : "AdamW, when an update is pending";
  case StepKind::GatherUpdatedWeights:
    return fmt::format("g2g: all-gather the new slices over dp {}", sp.dp);
  case StepKind::WriteBackOptimizerState:
    return o.optimizer > 0 && o.weights > 0 ? "d2h: its optimizer state and weights"
           : o.optimizer > 0                ? "d2h: its optimizer state"
                                            : "d2h: its new weights";
  case StepKind::GatherWeights:
    return fmt::format("g2g: all-gather its slices over dp {}", sp.dp);
  case StepKind::FetchWeights:
    return fmt::format("h2d: {} of its {}", percent(o.weights),
                       sp.zero.weights && sp.dp > 1 ? "slice" : "weights");
  case StepKind::Forward:
    return knobs().checkpointed(s.layer) ? "checkpointed: keeps only its input" : "";
  case StepKind::SwapOutActivations:
    return fmt::format("d2h: {} of its saved activations", percent(o.activations));
  case StepKind::SwapInActivations:
    return fmt::format("h2d: {} of its saved activations", percent(o.activations));
  case StepKind::Recompute:
    return "checkpointed: its forward again";
  case StepKind::Backward:
    return "";
  case StepKind::FetchGradientAccumulators:
    return fmt::format("h2d: {} of its gradient sums", percent(o.grads));
  case StepKind::WriteBackGradients:
    return "d2h: its sums, this micro-batch's added";
  case StepKind::ReduceScatterGradients:
    return zero2 ? fmt::format("g2g: into the slice over dp {}", sp.dp)
                 : fmt::format("g2g: the sums into the slice over dp {}", sp.dp);
  case StepKind::AllReduceGradients:
    return fmt::format("g2g: the sums over dp {}", sp.dp);
  }
  (void)p;
  return "";
}

/// A phase's steps cut after each layer's forward or backward and around
/// the stage's own steps: a chunk's `anchor` is that layer (-1 for a stage
/// step, or layer steps not followed by their layer's compute), its `shape`
/// each step's kind and layer relative to the anchor, so chunks of equal
/// shape on consecutive layers are one loop.
struct Chunk {
  int anchor = -1;
  std::vector<const Step *> steps;
  std::vector<std::pair<StepKind, int>> shape;
};

std::vector<Chunk> chunksOf(const std::vector<Step> &steps) {
  std::vector<Chunk> chunks(1);
  auto close = [&] {
    if (!chunks.back().steps.empty())
      chunks.emplace_back();
  };
  for (size_t k = 0; k < steps.size(); ++k) {
    const Step &s = steps[k];
    if (s.layer < 0) { // a chunk of its own
      close();
      chunks.back().steps.push_back(&s);
      close();
      continue;
    }
    chunks.back().steps.push_back(&s);
    if (s.kind == StepKind::Forward || s.kind == StepKind::Backward) {
      chunks.back().anchor = s.layer;
      // The layer's steps after its compute (its gradients' reduction) too.
      while (k + 1 < steps.size() && steps[k + 1].layer == s.layer)
        chunks.back().steps.push_back(&steps[++k]);
      close();
    }
  }
  if (chunks.back().steps.empty())
    chunks.pop_back();
  for (Chunk &c : chunks)
    for (const Step *s : c.steps)
      c.shape.push_back({s->kind, s->layer < 0 || c.anchor < 0 ? INT_MIN : s->layer - c.anchor});
  return chunks;
}

void StepWriter::phase(Phase p, int c) {
  chunk = c;
  const PhaseFunction &f = phaseFunctions[unsigned(p)];
  const bool forward = isForward(p);
  const int G = plan.gradAccum;
  const std::string name = functionName(p, c);
  const ChunkPlace &place = schedule.chunks[size_t(c)].place;
  if (interleaved())
    os << fmt::format("// Chunk {} (layers {}-{}). ", c, place.firstLayer,
                      place.firstLayer + place.layers - 1);
  else
    os << "// ";
  os << f.heading
     << (p == Phase::LastBackward && sp.dp > 1 ? " It also reduces the gradients over dp." : "")
     << "\n";
  if (p == Phase::FirstForward)
    os << fmt::format("void {}(StageRunner &r, int step) {{\n  const int mb = 0;\n", name);
  else if (p == Phase::LastBackward)
    os << fmt::format("void {}(StageRunner &r) {{\n  const int mb = {};\n", name, G - 1);
  else if (forward)
    os << fmt::format("void {}(StageRunner &r, int step, int mb) {{\n", name);
  else
    os << fmt::format("void {}(StageRunner &r, int mb) {{\n", name);
  const std::vector<Step> &steps = schedule.phase(p, c);
  const std::string chunkArg = interleaved() ? fmt::format(", {}", c) : "";
  // The forward's slot and data come after pre's and post's updates (which
  // free their gradients first: the memory the model counts).
  size_t begun = 0;
  if (forward)
    while (begun < steps.size() && (steps[begun].kind == StepKind::PreOptimizerStep ||
                                    steps[begun].kind == StepKind::PostOptimizerStep)) {
      line(1, call(steps[begun], ""), why(steps[begun], p));
      ++begun;
    }
  line(1,
       forward ? fmt::format("r.beginForward(step, mb{});", chunkArg)
               : fmt::format("r.beginBackward(mb{});", chunkArg),
       forward ? "its activations get a slot; the data"
               : "back to its slot; zeroed gradient buffers");
  const std::vector<Step> rest(steps.begin() + long(begun), steps.end());
  const std::vector<Chunk> chunks = chunksOf(rest);
  for (size_t c = 0; c < chunks.size();) {
    size_t end = c + 1; // chunks [c, end) of one shape on consecutive layers
    const int stride = forward ? 1 : -1;
    while (chunks[c].anchor >= 0 && end < chunks.size() && chunks[end].shape == chunks[c].shape &&
           chunks[end].anchor == chunks[end - 1].anchor + stride)
      ++end;
    if (end - c >= 2) {
      const int from = global(chunks[c].anchor), to = global(chunks[end - 1].anchor);
      os << fmt::format("  for (int l = {0}; l {1} {2}; {3}l) {{ // layers {0}-{2}\n", from,
                        forward ? "<=" : ">=", to, forward ? "++" : "--");
      for (size_t k = 0; k < chunks[c].steps.size(); ++k) {
        const Step &s = *chunks[c].steps[k];
        const int offset = chunks[c].shape[k].second;
        if (!emitted(s))
          continue;
        const std::string layer = offset == 0  ? "l"
                                  : offset > 0 ? fmt::format("l + {}", offset)
                                               : fmt::format("l - {}", -offset);
        line(2, call(s, layer), why(s, p));
      }
      os << "  }\n";
    } else {
      for (const Step *s : chunks[c].steps)
        if (emitted(*s))
          line(1, call(*s, s->layer >= 0 ? std::to_string(global(s->layer)) : ""), why(*s, p));
    }
    c = end;
  }
  line(1,
       forward ? fmt::format("r.endForward(mb{});", chunkArg)
               : fmt::format("r.endBackward(mb{});", chunkArg),
       forward ? (sp.offload.activations > 0 ? "kept for the backward; d2h: the rest of the tails"
                                             : "kept in its slot for the backward")
               : "into the step's gradient sums (what no step folded)");
  os << "}\n\n";
}

void StepWriter::iteration() {
  if (interleaved())
    return interleavedIteration();
  const int S = int(plan.stages.size()), G = plan.gradAccum;
  const int warm = std::min(S - i - 1, G);
  auto fwd = [&](int mb) {
    return mb == 0 ? fmt::format("s{}_firstForward(r, step);", i)
                   : fmt::format("s{}_forward(r, step, {});", i, mb);
  };
  auto bwd = [&](int mb) {
    return mb == G - 1 ? fmt::format("s{}_lastBackward(r);", i)
                       : fmt::format("s{}_backward(r, {});", i, mb);
  };
  os << fmt::format("// One step of stage {} of {}: 1F1B over G = {} micro-batch{}: {} warm-up "
                    "forward{}, {} steady\n// forward-backward pair{}, {} cool-down backward{}.\n",
                    i, S, G, G == 1 ? "" : "es", warm, warm == 1 ? "" : "s", G - warm,
                    G - warm == 1 ? "" : "s", warm, warm == 1 ? "" : "s");
  os << fmt::format("void s{}_iteration(StageRunner &r, int step) {{\n", i);
  if (warm > 0) {
    os << "  // warm-up\n  " << fwd(0) << "\n";
    if (warm == 2)
      os << "  " << fwd(1) << "\n";
    else if (warm > 2)
      os << fmt::format("  for (int mb = 1; mb < {}; ++mb)\n    s{}_forward(r, step, mb);\n", warm,
                        i);
  }
  // Steady pairs k = 0..G-warm-1: the forward of warm + k, the backward of k.
  if (G - warm > 0)
    os << "  // steady: a forward, then a backward\n";
  int k = 0;
  const int pairs = G - warm;
  if (warm == 0) { // the first pair starts with the first forward
    os << "  " << fwd(0) << "\n  " << bwd(0) << "\n";
    k = 1;
  }
  // The middle pairs are regular unless the last backward falls in them.
  const int regularEnd = warm == 0 ? pairs - 1 : pairs;
  if (regularEnd - k >= 2)
    os << fmt::format("  for (int mb = {}; mb < {}; ++mb) {{\n    s{}_forward(r, step, {});\n"
                      "    s{}_backward(r, mb);\n  }}\n",
                      k, regularEnd, i, warm == 0 ? "mb" : fmt::format("mb + {}", warm), i);
  else
    for (int j = k; j < regularEnd; ++j)
      os << "  " << fwd(warm + j) << "\n  " << bwd(j) << "\n";
  if (warm == 0 && pairs > 1)
    os << "  " << fwd(G - 1) << "\n  " << bwd(G - 1) << "\n";
  if (warm > 0) {
    os << "  // cool-down\n";
    const int from = G - warm;
    if (warm - 1 >= 2)
      os << fmt::format("  for (int mb = {}; mb < {}; ++mb)\n    s{}_backward(r, mb);\n", from,
                        G - 1, i);
    else
      for (int mb = from; mb < G - 1; ++mb)
        os << "  " << bwd(mb) << "\n";
    os << "  " << bwd(G - 1) << "\n";
  }
  os << "}\n\n";
}

// Interleaved, the order has G v runs: it is computed by the runtime from
// the same function mistc priced (schedule/Schedule.h), and each run calls
// its chunk's phase function.
void StepWriter::interleavedIteration() {
  const int S = int(plan.stages.size()), G = plan.gradAccum;
  const int v = int(schedule.chunks.size()), total = G * v;
  const int warm = interleavedWarmUp(i, S, G, v);
  os << fmt::format(
      "// One step of stage {} of {}: interleaved 1F1B (Megatron-LM's order) over G = {} "
      "micro-batches\n// and {} model chunks: {} warm-up forward{}, {} steady forward-backward "
      "pair{}, {} cool-down\n// backward{}; forward k runs chunk (k mod {}) / {} on "
      "micro-batch (k / {}) x {} + k mod {}, backward k\n// the same micro-batch on chunk {} - "
      "(k mod {}) / {} (interleavedOneFOneB).\n",
      i, S, G, v, warm, warm == 1 ? "" : "s", total - warm, total - warm == 1 ? "" : "s", warm,
      warm == 1 ? "" : "s", S * v, S, S * v, S, S, v - 1, S * v, S);
  os << fmt::format("void s{}_run(StageRunner &r, int step, const mist::ScheduledRun &run) {{\n",
                    i);
  os << "  switch (run.chunk) {\n";
  for (int c = 0; c < v; ++c) {
    os << fmt::format("  case {}:\n", c);
    os << fmt::format("    if (run.forward)\n      return run.mb == 0 ? {}(r, step) : {}(r, step, "
                      "run.mb);\n",
                      functionName(Phase::FirstForward, c), functionName(Phase::Forward, c));
    os << fmt::format("    return run.mb == {} ? {}(r) : {}(r, run.mb);\n", G - 1,
                      functionName(Phase::LastBackward, c), functionName(Phase::Backward, c));
  }
  os << "  }\n}\n\n";
  os << fmt::format("void s{}_iteration(StageRunner &r, int step) {{\n", i);
  os << fmt::format("  for (const mist::ScheduledRun &run : mist::interleavedOneFOneB({}, {}, {}, "
                    "{}))\n    s{}_run(r, step, run);\n}}\n\n",
                    i, S, G, v, i);
}

} // namespace

void mist::emitStageSteps(const Plan &plan, int i, llvm::raw_ostream &os) {
  StepWriter writer(plan, i, os);
  const StageSchedule schedule = buildStageSchedule(plan, i);
  os << fmt::format("// ---- stage {}'s schedule: the steps mistc priced (mistc --emit=schedule "
                    "lists them\n// with what each waits for), one call each, layers by the "
                    "model's numbers ----\n\n",
                    i);
  for (size_t c = 0; c < schedule.chunks.size(); ++c)
    for (unsigned p = 0; p < numPhases; ++p)
      if (schedule.runs(Phase(p)))
        writer.phase(Phase(p), int(c));
  writer.iteration();
}
