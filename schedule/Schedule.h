//===- Schedule.h - What a pipeline stage does, step by step --------------===//
/// \file
/// The one description of a stage's iteration that the performance model
/// prices, `mistc --emit=schedule` and `--emit=timeline` show and the
/// trainer emitter follows: the 1F1B order of micro-batches, and for each
/// of the four phase kinds (the first forward, a stable forward, a stable
/// backward, the last backward) the ordered steps on each stream with the
/// steps each waits for. Plain C++ (format layer types only), so the
/// runtime can read it too.
///
/// A phase is built from its layers' steps (layerSteps) between the
/// stage's own steps (pre/post, pipeline messages). The time model prices a
/// layer by summing its steps' costs per stream (perfmodel/StageModel.cpp),
/// so a step added here is a step priced there.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Plan.h"
#include "format/Streams.h"

#include <array>
#include <utility>
#include <vector>

namespace mist {

/// The phase kinds of a stage's iteration. The first forward also runs the
/// previous iteration's optimizer step, layer by layer; the last backward
/// also reduces the gradients over dp.
enum class Phase { FirstForward, Forward, Backward, LastBackward };
constexpr unsigned numPhases = 4;
/// "first forward (micro-batch 0)", ...: a reader's heading.
const char *phaseName(Phase p);
inline bool isForward(Phase p) { return p == Phase::FirstForward || p == Phase::Forward; }

enum class StepKind {
  // The stage's own steps (layer -1).
  PreOptimizerStep,
  PostOptimizerStep,
  PreForward,
  ReceiveActivations,
  PostForward,
  SendActivations,
  PostBackward,
  ReceiveGradients,
  PreBackward,
  SendGradients,
  ReducePreGradients,
  ReducePostGradients,
  // A layer's steps.
  FetchOptimizerState,     ///< h2d: offloaded optimizer state and gradients, for the step
  OptimizerStep,           ///< AdamW on the layer (its ZeRO-1 shard)
  WriteBackOptimizerState, ///< d2h: offloaded optimizer state and updated weights
  GatherUpdatedWeights,    ///< g2g: ZeRO-1's all-gather of the updated shards
  GatherWeights,           ///< g2g: ZeRO-3's all-gather before each use
  FetchWeights,            ///< h2d: the offloaded part of the weights
  Forward,
  SwapOutActivations, ///< d2h: the offloaded part of the saved activations
  SwapInActivations,  ///< h2d: and back for the backward
  Recompute,          ///< a checkpointed layer's forward again
  Backward,
  FetchGradientAccumulators, ///< h2d: offloaded gradient sums, when G > 1
  WriteBackGradients,        ///< d2h: and back
  ReduceScatterGradients,    ///< g2g: ZeRO-2, or ZeRO-1's last backward
  AllReduceGradients,        ///< g2g: plain data parallelism's last backward
};
constexpr unsigned numStepKinds = unsigned(StepKind::AllReduceGradients) + 1;

Stream streamOf(StepKind k);
/// A stable identifier ("gather-weights"), for tests and tools.
const char *stepName(StepKind k);

/// What a stage's schedule depends on: its plan entry and its place in the
/// pipeline. The performance model's StageKnobs extends it with what only
/// the costs depend on.
struct ScheduleKnobs {
  int layers = 1, ckpt = 0; ///< layers, and how many of the last are checkpointed
  int dp = 1, tp = 1;
  ZeroFlags zero;
  OffloadRatios offload;
  bool first = true, last = true; ///< runs pre / post
  int gradAccum = 1;              ///< G
  int stages = 1;                 ///< S, the pipeline's
  int chunks = 1;                 ///< v: model chunks per stage (interleaved 1F1B)
  /// The last `ckpt` layers of the stage are recomputed.
  bool checkpointed(int layer) const { return layer >= layers - ckpt; }
};
ScheduleKnobs scheduleKnobs(const Plan &plan, int stage);

/// One layer's steps in a phase, in issue order (at most 10): what the time
/// model prices per layer, without allocating.
struct LayerSteps {
  std::array<StepKind, 12> kinds;
  unsigned count = 0;
  const StepKind *begin() const { return kinds.data(); }
  const StepKind *end() const { return kinds.data() + count; }
};
LayerSteps layerSteps(Phase phase, bool checkpointed, const ScheduleKnobs &k);

/// A step of a stage's phase: `kind` for `layer` (the stage's index from 0;
/// -1 for the stage's own steps), after the steps `after` (indices into the
/// phase) have finished. Steps on one stream also run in list order.
struct Step {
  StepKind kind;
  int layer = -1;
  std::vector<int> after;
  Stream stream() const { return streamOf(kind); }
};

/// The 1F1B order of stage i of S with G micro-batches: min(S - i - 1, G)
/// warm-up forwards, then one forward and one backward alternately, then
/// the remaining backwards. Entries are (micro-batch, isForward).
std::vector<std::pair<int, bool>> oneFOneB(int stage, int stages, int gradAccum);

/// One run of a stage's iteration: the forward or the backward of
/// micro-batch `mb` through the stage's model chunk `chunk` (0 unless the
/// plan interleaves).
struct ScheduledRun {
  int mb = 0;
  int chunk = 0;
  bool forward = true;
  bool operator==(const ScheduledRun &) const = default;
};

/// Megatron-LM's interleaved 1F1B for stage i of S holding v model chunks,
/// with G micro-batches (G divisible by S): (S - i - 1) * 2 + (v - 1) * S
/// warm-up forwards (at most G v), then a forward and a backward
/// alternately, then the remaining backwards. Forward k runs chunk
/// (k mod S v) / S on micro-batch (k / S v) S + k mod S; backward k the
/// same micro-batch on chunk v - 1 - (k mod S v) / S. With v = 1 it is
/// oneFOneB.
std::vector<ScheduledRun> interleavedOneFOneB(int stage, int stages, int gradAccum, int chunks);
/// The forwards before the first backward in that order.
int interleavedWarmUp(int stage, int stages, int gradAccum, int chunks);

/// Where stage i's model chunk c sits in the model: chunk c of stage i is
/// the model's chunk c S + i, of the stage's layers / v layers. The model's
/// layers are rows of S chunks, row c holding every stage's chunk c in stage
/// order, so stages of different sizes (fewer layers on the first and last,
/// as Megatron-LM's uneven pipelines) interleave too.
struct ChunkPlace {
  int firstLayer = 0;      ///< the model's number of its first layer
  int stageFirstLayer = 0; ///< the stage's index of its first layer (c * layers)
  int layers = 1;
};
ChunkPlace chunkPlace(const Plan &plan, int stage, int chunk);

/// One model chunk's steps: its knobs (the chunk's layers; first and last
/// say whether it runs pre and post; its share of the stage's checkpointed
/// layers, the stage's last ones) and, per phase kind, its steps with
/// layers numbered within the chunk.
struct ChunkSchedule {
  ChunkPlace place;
  ScheduleKnobs knobs;
  std::vector<Step> phases[numPhases]; ///< indexed by Phase
};

struct StageSchedule {
  int stage = 0;
  ScheduleKnobs knobs;               ///< the whole stage's
  std::vector<ScheduledRun> order;   ///< 1F1B, interleaved when the stage has several chunks
  std::vector<ChunkSchedule> chunks; ///< one unless the plan interleaves
  /// Chunk `chunk`'s steps of phase `p`.
  const std::vector<Step> &phase(Phase p, int chunk = 0) const {
    return chunks[size_t(chunk)].phases[unsigned(p)];
  }
  /// Which phase kind runs for entry k of `order`.
  Phase phaseOf(size_t k) const;
  /// Whether some entry of `order` runs phase `p` (G = 1 has no stable one).
  bool runs(Phase p) const;
};

StageSchedule buildStageSchedule(const Plan &plan, int stage);

} // namespace mist
