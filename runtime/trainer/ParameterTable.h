//===- ParameterTable.h - A stage's parameter tensors as the plan lays them out ===//
/// \file
/// What a rank keeps of each parameter of its stage, and where: the
/// weights (in the region frames, where the generated code reads them), the
/// fp32 master copies and Adam moments, the step's gradient sums and their
/// offloaded tails, laid out as the plan's ZeRO level and offload ratios say
/// (runtime/trainer/ParameterStore.h). The table holds the tensors; the
/// rooms that work on them (WeightMoves, GradientSums, OptimizerUpdate,
/// ParameterValues) see it through a ParameterView.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/comm/Communicator.h"
#include "runtime/trainer/OffloadEngine.h"
#include "runtime/trainer/Streams.h"
#include "runtime/trainer/Trainer.h"

#include <string>
#include <utility>
#include <vector>

namespace mist::rt {

/// The groups a stage's parameters are reduced over, and this rank's place.
struct StageGroups {
  Communicator &tp, &dp;
  Communicator *tied; ///< the first and last stages' ranks; null when S = 1 or not in either
  /// Those of them with this rank's tp rank, when both end stages have the
  /// same tp (so a tp rank holds the same part of a tied weight on both); else null.
  Communicator *tiedShard;
  bool firstStage = true;
};

/// AdamW's settings for one step.
struct AdamStep {
  float lr, beta1, beta2, eps, weightDecay;
  float gradScale; ///< applied to the gradient sums first (1/(G dp) times the clip factor)
  int step;        ///< 1-based, for the bias corrections
};

/// Which of a parameter's tensors (checkpoints hold all four).
enum class ParamTensor { Weight, Master, AdamM, AdamV };

/// A region of the stage: pre, one of its layers (the stage's index from
/// 0), or post. A parameter copy belongs to the region that owns it (a
/// layer's to its layer, the embedding to pre, the head to post): its
/// optimizer update is that region's.
struct StageRegion {
  RegionKind kind = RegionKind::Layer;
  int layer = 0;
  static StageRegion pre() { return {RegionKind::Pre, 0}; }
  static StageRegion post() { return {RegionKind::Post, 0}; }
  static StageRegion ofLayer(int l) { return {RegionKind::Layer, l}; }
  bool operator==(const StageRegion &) const = default;
};

/// One parameter copy (a layer parameter has one per layer of the stage).
struct ParamState {
  size_t local = 0; ///< elements of this tp rank's tensor
  size_t chunk = 0; ///< elements of one dp slice (ZeRO), else local
  bool resident = true;
  /// Without ZeRO-1 and weight offload AdamW writes the new weights
  /// straight into them; in fp32 the weights are then the masters too.
  bool weightsInPlace = false;
  bool masterIsWeights = false; ///< fp32 training without ZeRO or offload: one copy
  bool sumsInPlace = false;     ///< the micro-batches sum into the gradient buffer itself
  bool reducedEarly = false;    ///< reduceRegionGradients took it this step
  bool updateDue = false;       ///< a deferred step has not updated it yet
  /// master, m, v: fp32; grad: the gradients' type; shard (the ZeRO-3
  /// weight slice): the weights'.
  DeviceTensor master, m, v, grad, shard;
  DeviceTensor incoming; ///< ZeRO-2: a micro-batch's slice, until added to an offloaded sum
  HostBytes masterHost, mHost, vHost, gradHost, shardHost, weightHost;
};

/// The tensors and the layout: owned by ParameterStore, shared by its rooms.
struct ParameterTable {
  ParameterTable(const StageSpec &stage, Frame &global, std::vector<Frame> &layers,
                 StageGroups groups, OffloadEngine &offload, Streams &streams);
  const StageSpec &spec;
  Frame &global;
  std::vector<Frame> &layers;
  StageGroups groups;
  OffloadEngine &offload;
  Streams &streams;
  int tpRank, dpRank, tp, dp;
  /// ZeRO-1's optimizer state sliced over dp (dp > 1), ZeRO-2's gradient
  /// sums too, ZeRO-3's weights too.
  bool sliced, gradsSliced, weightsSliced;
  std::vector<std::vector<ParamState>> state; ///< [param][layer copy]
  std::vector<Event> updated;                 ///< per region (slot): its last optimizer update
};

/// A room's view of the table: its fields by name, and what every room
/// asks of the layout.
class ParameterView {
protected:
  explicit ParameterView(ParameterTable &table);

  using State = ParamState;
  using Copies = std::vector<std::pair<size_t, size_t>>; ///< (param, copy)

  DeviceTensor &weights(size_t p, int layer);
  DeviceTensor &gradBuffer(int buffer, int layer);
  /// The step's gradient sum of a parameter copy (its buffer when summed in place).
  DeviceTensor &gradSum(size_t p, size_t copy);
  DeviceTensor &masterOf(size_t p, size_t copy);
  /// The distinct arrays of a parameter copy's gradient buffers.
  std::vector<DeviceTensor *> gradArrays(size_t p, size_t copy);
  bool uses(const ParamSpec &ps, RegionKind region) const;
  /// Every parameter copy `region` reads.
  Copies paramsOf(StageRegion region) const;
  /// Every parameter copy `region` owns (its optimizer update's).
  Copies membersOf(StageRegion region) const;
  StageRegion regionOf(size_t p, size_t copy) const;
  /// Per-region arrays: pre 0, layer l at 1 + l, post last.
  size_t slot(StageRegion region) const;
  size_t regionCount() const { return size_t(spec.layers) + 2; }
  std::string regionName(StageRegion region) const;
  /// ZeRO-2 gradients that are reduce-scattered region by region, right
  /// after the backward of the last region reading the parameter (pre's for
  /// a weight pre and post share), their buffers freed until the next
  /// micro-batch's backward: only the tied embedding of a pipeline is not.
  /// Offloaded gradients are added to the step's sum the same way, after
  /// each region reading them.
  bool foldedPerRegion(size_t p) const;
  RegionKind lastBackwardOf(const ParamSpec &ps) const;
  bool tied(size_t p) const { return spec.params[p].tiedAcrossStages && groups.tied; }
  /// Whether weights move between uses (ZeRO-3 slices, weight offload).
  bool movesWeights() const { return weightsSliced || spec.offloadWeights > 0; }
  /// This dp rank's flat slice of a tp-local tensor (the last one zero-padded).
  DeviceTensor slice(const DeviceTensor &local, size_t chunk) const;
  /// `into` (n elements) = this tp rank's whole tensor from the dp ranks' slices.
  void unsplit(DeviceTensor &into, const DeviceTensor &slice, size_t n);
  std::vector<float> gatherOverTp(size_t p, const DeviceTensor &local);
  DType weightType(size_t p) const { return spec.buffers[size_t(spec.params[p].buffer)].dtype; }
  DType gradType(size_t p) const { return spec.buffers[size_t(spec.params[p].grads[0])].dtype; }

  const StageSpec &spec;
  Frame &global;
  std::vector<Frame> &layers;
  StageGroups &groups;
  OffloadEngine &offload;
  Streams &streams;
  const int tpRank, dpRank, tp, dp;
  const bool sliced, gradsSliced, weightsSliced;
  std::vector<std::vector<State>> &state;
  std::vector<Event> &updated;
};

} // namespace mist::rt
