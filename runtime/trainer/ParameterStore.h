//===- ParameterStore.h - One stage's parameters and optimizer state ------===//
/// \file
/// Everything a rank keeps of its stage's parameters: the weights (in the
/// region frames, where the generated code reads them), the fp32 master
/// copies and Adam moments, and the gradient sums of the step, laid out as
/// the plan's ZeRO flags and offload ratios say:
/// - ZeRO-1 (`zeroOptimizer`, dp > 1): masters and moments of one flat slice
///   of every tensor per dp rank (the last slice padded); gradients are
///   reduce-scattered, the updated weights all-gathered;
/// - ZeRO-2 (`zeroGrads`): the gradient sums are sliced too: every
///   micro-batch's gradients are reduce-scattered into the slice at once;
/// - ZeRO-3 (`zeroWeights`): only the weight slice is kept; a region's
///   weights are all-gathered just before it runs (forward, recompute,
///   backward) and dropped after;
/// - offload: the tail fraction of weights (or of the ZeRO-3 slice),
///   gradient sums and optimizer state lives in host memory between uses
///   (OffloadEngine); the optimizer steps the device part of its state in
///   place and the host tail in a staging buffer of one layer's size.
/// Weights have the plan's dtype (bf16: rounded from the fp32 masters by
/// every AdamW step), gradient buffers and sums its grad_dtype, masters and
/// moments fp32. Without ZeRO and offload, nothing is kept twice: an fp32
/// plan's master weights are its weights (AdamW updates them in place), and a
/// parameter with one gradient buffer sums the step's micro-batches there
/// (the ops accumulate) instead of in a separate gradient sum.
/// Gathers and reductions run on the g2g stream, offload copies on h2d and
/// d2h, the optimizer on compute (runtime/trainer/Streams.h).
/// A weight tied across the first and last stage (the embedding) has its
/// gradient summed over both stages' ranks before the step, so both copies
/// take the same update.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/comm/Communicator.h"
#include "runtime/trainer/OffloadEngine.h"
#include "runtime/trainer/Streams.h"
#include "runtime/trainer/Trainer.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>

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

class ParameterStore {
public:
  ParameterStore(const StageSpec &stage, Frame &global, std::vector<Frame> &layers,
                 StageGroups groups, OffloadEngine &offload, Streams &streams);

  /// Canonical initial values (runtime/trainer/Initialization.cpp), all
  /// weights resident, the optimizer state's offloaded tails already in host
  /// memory; then `load` may overwrite, and `settle` puts the weights where
  /// the plan keeps them between uses. `hostThreads`: threads drawing the
  /// values (initialValueThreads). `draw` false (a resumed run, whose
  /// checkpoint then loads every tensor) sets zeros instead of drawing values
  /// that would be overwritten: minutes for billions of weights.
  void initialize(uint64_t seed, int hostThreads, bool draw = true);
  void settle();

  /// The schedule's weight steps (docs/schedule.md): `fetchWeights` brings
  /// the offloaded tail of a region's weights (or of its ZeRO-3 slices) in
  /// over h2d, `gatherWeights` all-gathers its ZeRO-3 slices over g2g, each
  /// beside the compute issued before it; `prefetch` does what the region
  /// needs of both (pre and post, which have no steps of their own).
  /// `acquire` makes the region's compute wait for them (or brings them now
  /// if no step did) and `release` drops them after it. So at most two
  /// regions' weights are present: the double buffer the performance model
  /// counts.
  void fetchWeights(RegionKind region, int layer);
  void gatherWeights(RegionKind region, int layer);
  void prefetch(RegionKind region, int layer);
  void acquire(RegionKind region, int layer);
  void release(RegionKind region, int layer);

  /// Step start: gradient sums to zero.
  void beginStep();
  /// The op wrappers accumulate into the parameter-gradient buffers: clear
  /// them before a micro-batch's backward, fold them into the sums after.
  void clearGradBuffers();
  void foldGradBuffers();
  /// Around one region's backward, for gradients folded region by region
  /// (ZeRO-2, offloaded sums): its gradient buffers get zeroed memory
  /// before; after it the schedule's fold steps add them into the step's
  /// sums and free them, so full gradients exist for about one region at a
  /// time: `scatterRegionGradients` reduce-scatters them into this rank's
  /// ZeRO-2 slice (g2g), `fetchGradientSums` brings the offloaded tails of
  /// the sums in (h2d) and `writeBackGradientSums` adds this micro-batch's
  /// part and sends the tails back out (d2h). `foldRegionGradients` runs
  /// what applies of the three (pre and post, which have no steps of their own).
  void prepareGradBuffers(RegionKind region, int layer);
  void scatterRegionGradients(RegionKind region, int layer);
  void fetchGradientSums(RegionKind region, int layer);
  void writeBackGradientSums(RegionKind region, int layer);
  void foldRegionGradients(RegionKind region, int layer);
  /// The last backward's reduction of a region, as the stage schedule
  /// places it (AllReduceGradients, or ZeRO-1's ReduceScatterGradients):
  /// right after `region`'s backward of the last micro-batch, the sums over
  /// dp of the gradients complete by then, on the g2g stream beside the
  /// next region's backward. Those are the ones summed in place over the
  /// micro-batches and not tied across stages; ZeRO-2's were scattered by
  /// foldRegionGradients already.
  void reduceRegionGradients(RegionKind region, int layer);
  /// After the last micro-batch: sums over dp (or the slice's) what
  /// reduceRegionGradients did not, and over the two stages of a tied weight.
  void reduceGradients();
  /// This rank's share of the squared global gradient norm: every element
  /// of the model is counted by exactly one rank of the job.
  double normSquaredShare();
  /// The optimizer step, one group at a time (`group` -1 for pre, 0.. for
  /// the stage's layers, `layers` for post): AdamW on every tensor of the
  /// group (on the slice under ZeRO-1), then its weights updated where the
  /// plan keeps them. Each group's update ends with an event `acquire` (and
  /// `prefetch`) makes its reader wait for, so on GPUs a layer's forward can
  /// start while later layers are still being updated.
  ///
  /// As the stage schedule places it, a step's update runs in the next
  /// step's first forward, each group just before its weights are first
  /// wanted: `deferStep` keeps the step's AdamW settings with every group
  /// pending (its gradient sums kept: the next beginStep leaves them). A
  /// group's update is the schedule's four steps: `fetchOptimizerState`
  /// (h2d: its offloaded masters and moments into a staging buffer),
  /// `optimizerStep` (AdamW; with `stepUnderWay`, in a forward, its sums are
  /// then zeroed for the step under way), `gatherUpdatedWeights` (g2g:
  /// ZeRO-1/2's all-gather of the new slices) and `writeBackOptimizerState`
  /// (d2h: the state and the new weights kept in host memory); each does
  /// nothing for a group with no pending update or nothing of its kind to
  /// move. `applyPendingStep` runs all four (false: none pending);
  /// `completeUpdate` runs what is left of one under way. The last ends the
  /// deferral (finishDeferred), and the job if a tensor was left out.
  void deferStep(const AdamStep &adam);
  bool hasPendingStep() const { return pendingStep.has_value(); }
  const AdamStep &pendingAdam() const { return *pendingStep; }
  void fetchOptimizerState(int group);
  void optimizerStep(int group, bool stepUnderWay);
  void gatherUpdatedWeights(int group);
  void writeBackOptimizerState(int group);
  bool applyPendingStep(int group, bool stepUnderWay);
  void completeUpdate(int group, bool stepUnderWay);
  /// Whether the group's update is pending or under way (its weights are
  /// not yet the ones the step computed).
  bool updateDue(int group) const;
  void finishDeferred();
  /// The optimizer group of a region: -1 pre, a layer, or `layers` post.
  int groupOfRegion(RegionKind region, int layer) const;

  size_t paramCount() const { return state.size(); }
  int copies(size_t p) const { return int(state[p].size()); }
  /// The full tensor (gathered over the stage's dp and tp ranks), on every
  /// rank of the stage. Collective over the stage.
  std::vector<float> full(size_t p, int layer, ParamTensor what);
  /// Sets this rank's part of a tensor from the full values (of its size).
  void load(size_t p, int layer, ParamTensor what, const std::vector<float> &fullValues);

private:
  struct State {
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
  DeviceTensor &weights(size_t p, int layer);
  DeviceTensor &gradBuffer(int buffer, int layer);
  /// The step's gradient sum of a parameter copy (its buffer when summed in place).
  DeviceTensor &gradSum(size_t p, size_t copy);
  DeviceTensor &masterOf(size_t p, size_t copy);
  /// The distinct arrays of a parameter copy's gradient buffers.
  std::vector<DeviceTensor *> gradArrays(size_t p, size_t copy);
  bool uses(const ParamSpec &ps, RegionKind region) const;
  /// (param, copy) of every parameter `region` (layer `layer`) reads.
  std::vector<std::pair<size_t, size_t>> paramsOf(RegionKind region, int layer) const;
  std::string regionName(RegionKind region, int layer) const;
  /// A group's update between its schedule steps.
  struct GroupUpdate {
    int group = 0;
    std::vector<std::pair<size_t, size_t>> members;
    std::vector<size_t> stagedAt;   ///< each member's offset in the staging buffers
    size_t staged = 0;              ///< elements of offloaded state staged
    bool inPlace = true;            ///< AdamW writes the weights themselves
    std::vector<DeviceTensor> next; ///< else the new weights (or slices), per member
    std::vector<char> resident;     ///< per member: its weights were resident before the gather
    bool fetched = false, stepped = false, gathered = false, written = false;
    Event last; ///< the last of its steps so far
  };
  /// The group's update under way, begun now if pending; null if neither.
  GroupUpdate *updateOf(int group);
  bool needsGather(const GroupUpdate &u) const;
  bool needsWriteBack(const GroupUpdate &u) const;
  void finishIfDone(GroupUpdate &u);
  std::string groupName(int group) const;
  RegionKind regionOfGroup(int group) const;
  /// How weights come in: the offloaded tail over h2d, the ZeRO-3 slices
  /// all-gathered over g2g.
  enum class WeightMove { Fetch, Gather };
  void bring(RegionKind region, int layer, WeightMove move); ///< now, on the current stream
  void startMove(RegionKind region, int layer, WeightMove move);
  /// (param, copy) of what a region's fold steps take.
  std::vector<std::pair<size_t, size_t>> foldedBy(RegionKind region, int layer) const;
  void runFold(StreamKind stream, const std::string &what, RegionKind region, int layer,
               std::function<void(size_t, size_t)> work);
  void freeGradBuffers(size_t p, size_t copy);
  /// One micro-batch's gradient of a parameter copy: its buffers summed,
  /// under ZeRO-2 reduce-scattered into this rank's slice; empty for a
  /// parameter's one buffer, which addToSum reads as it is.
  DeviceTensor microBatchGradient(size_t p, size_t copy);
  void addToSum(size_t p, size_t copy, const DeviceTensor &gradient);
  /// ZeRO-2 gradients that are reduce-scattered region by region, right
  /// after the backward of the last region reading the parameter (pre's for
  /// a weight pre and post share), their buffers freed until the next
  /// micro-batch's backward: only the tied embedding of a pipeline is not.
  /// Offloaded gradients are added to the step's sum the same way, after
  /// each region reading them.
  bool foldedPerRegion(size_t p) const;
  RegionKind lastBackwardOf(const ParamSpec &ps) const;
  /// Whether reduceRegionGradients sums this parameter copy over dp.
  bool reducedPerRegion(size_t p, size_t copy) const;
  /// One parameter copy's step sum over dp: all-reduced, or under ZeRO-1
  /// reduce-scattered into the rank's slice.
  void reduceOverDp(size_t p, size_t copy);
  void foldInto(size_t p, size_t copy); ///< one micro-batch's gradient into the step's sum
  bool tied(size_t p) const { return spec.params[p].tiedAcrossStages && groups.tied; }
  DeviceTensor slice(const DeviceTensor &local, size_t chunk) const;
  /// `into` (n elements) = this tp rank's whole tensor from the dp ranks' slices.
  void unsplit(DeviceTensor &into, const DeviceTensor &slice, size_t n);
  std::vector<float> gatherOverTp(size_t p, const DeviceTensor &local);
  int groupOf(size_t p, size_t copy) const;
  /// (param, copy) of every parameter copy in optimizer group `group`.
  std::vector<std::pair<size_t, size_t>> membersOf(int group) const;
  /// A parameter copy's step sums to zero, where they live (beginStep).
  void zeroSums(size_t p, size_t copy);
  /// Whether weights move between uses (ZeRO-3 slices, weight offload).
  bool movesWeights() const;
  void sumTiedOverStages(size_t p, State &s);
  void swapOutOptimizer(State &s);
  void swapInOptimizer(State &s);

  const StageSpec &spec;
  Frame &global;
  std::vector<Frame> &layers;
  StageGroups groups;
  OffloadEngine &offload;
  Streams &streams;
  int tpRank, dpRank, tp, dp;
  bool sliced, gradsSliced, weightsSliced;
  std::vector<std::vector<State>> state; ///< [param][layer copy]
  std::vector<Event> updated;            ///< per group (index group + 1): its last update
  std::vector<Event> prefetched;         ///< per group (index group + 1): its weights brought in
  std::vector<Event> folded;             ///< per group (index group + 1): its gradients' last fold
  DeviceArray<double> normSum;           ///< normSquaredShare's accumulator
  std::optional<AdamStep> pendingStep;   ///< deferStep's, until finishDeferred
  std::vector<char> groupPending;        ///< per group (index group + 1): not begun
  std::map<int, std::shared_ptr<GroupUpdate>> updates; ///< begun, not finished
  /// The offloaded tails of one group's optimizer state (masters, m, v),
  /// stepped here: the device part is stepped in place.
  DeviceTensor stagedMaster, stagedM, stagedV;
  DType weightType(size_t p) const { return spec.buffers[size_t(spec.params[p].buffer)].dtype; }
  DType gradType(size_t p) const { return spec.buffers[size_t(spec.params[p].grads[0])].dtype; }
};

} // namespace mist::rt
