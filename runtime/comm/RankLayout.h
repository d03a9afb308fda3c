//===- RankLayout.h - Where each plan stage's dp and tp ranks live --------===//
/// \file
/// Pure arithmetic over a plan's stages (no MPI): which world ranks a stage
/// occupies, this rank's stage, dp rank and tp rank, the world ranks of its
/// tp and dp groups, and how a micro-batch is re-sliced between stages of
/// different dp. ProcessGroups turns it into communicators.
///
/// Layout: stages occupy consecutive world ranks in plan order; inside a
/// stage, worldRank = stageStart + dpRank * tp + tpRank. tp is innermost, so
/// a tp group is contiguous and, with ranks packed per node by the launcher,
/// within one node (the plan only lets tp span nodes where the cluster can).
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mist::rt {

/// What the runtime needs of a plan stage to place it.
struct StageShape {
  int ranks = 1; ///< GPUs (processes) of the stage: the mesh's nodes * gpus_per_node
  int dp = 1;
  int tp = 1;
};

struct RankLayout {
  std::vector<StageShape> stages;
  std::vector<int> stageStarts; ///< first world rank of each stage
  int worldSize = 0;

  // This rank.
  int myWorldRank = 0;
  int stage = 0;
  int stageStart = 0;
  int dpRank = 0;
  int tpRank = 0;
  std::vector<int> tpGroup; ///< world ranks of this rank's tp group, in tp-rank order
  std::vector<int> dpGroup; ///< world ranks of this rank's dp group, in dp-rank order

  /// The layout seen from `worldRank`, or nullopt with `error` saying what
  /// is inconsistent: no stages, a stage with dp * tp != ranks or a count
  /// below 1, world size != the sum of the stages' ranks, rank out of range.
  static std::optional<RankLayout> build(const std::vector<StageShape> &stages, int worldSize,
                                         int worldRank, std::string &error);

  /// The world rank of (stage, dpRank, tpRank).
  int worldRank(int stage, int dpRank, int tpRank) const;
  bool isFirstStage() const { return stage == 0; }
  bool isLastStage() const { return stage + 1 == static_cast<int>(stages.size()); }
};

/// Samples [begin, end) of a global micro-batch: the M = b_i * dp_i
/// sequences that all dp ranks of a stage process together in one
/// micro-batch step (plan key `micro_batch` is b_i). Plans make M the same
/// on every stage (micro_batch * dp * grad_accum = global_batch).
struct SampleRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
  bool operator==(const SampleRange &) const = default;
};

/// The samples of a global micro-batch of M samples that dp rank r of `dp`
/// holds: [r * b, (r + 1) * b) with b = M / dp (plans make it divide).
/// Otherwise the split stays contiguous and as even as it can be:
/// [floor(r * M / dp), floor((r + 1) * M / dp)).
SampleRange samplesOfDpRank(int dpRank, int dp, int64_t globalMicroBatch);

/// The rows of a global micro-batch's activations that rank (dpRank,
/// tpRank) of a stage holds between regions: its dp rank's samples, or
/// under sequence parallelism (`tokensPerSample` > 0) its tp rank's
/// contiguous tp-th of those samples' tokens (flattened, sample-major), as
/// global token indices.
SampleRange activationRowsOf(const StageShape &stage, int dpRank, int tpRank,
                             int64_t globalMicroBatch, int64_t tokensPerSample = 0);

/// One message of a re-slice: world rank `from` sends world rank `to` the
/// activations of rows `rows`: samples, or under sequence parallelism
/// tokens (global indices; subtract the first row of each side's
/// activationRowsOf for its local offset).
struct Transfer {
  int from = 0, to = 0;
  SampleRange rows;
  bool operator==(const Transfer &) const = default;
};

/// Every message that moves a global micro-batch of M samples from stage
/// `fromStage` to stage `toStage`, whatever their dp and tp: tp rank 0 of
/// each sender dp rank (after the stage's tp collectives its activations are
/// replicated over tp) sends each overlapping sample range to every tp rank
/// of each receiving dp rank (each needs the full activations of its
/// samples). Under sequence parallelism (`tokensPerSample` > 0) each rank
/// holds and wants only its activationRowsOf, so every rank sends its own
/// tokens to the ranks that want them. Works both ways: forward (i to i + 1)
/// for activations, backward (i + 1 to i) for their gradients. Ordered by
/// receiver world rank, then row; every (receiver, row) pair appears exactly
/// once. A rank sends the transfers whose `from` is itself and receives
/// those whose `to` is; taken in list order with blocking send/recv this
/// cannot deadlock (the first transfer not yet done is next for both its
/// ranks).
std::vector<Transfer> reslice(const RankLayout &layout, int fromStage, int toStage,
                              int64_t globalMicroBatch, int64_t tokensPerSample = 0);

} // namespace mist::rt
