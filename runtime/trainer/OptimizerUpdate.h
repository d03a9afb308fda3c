//===- OptimizerUpdate.h - AdamW, region by region, where the schedule puts it ===//
/// \file
/// A step's update runs in the next step's first forward, each region's
/// just before its weights are first wanted (docs/schedule.md):
/// `deferStep` keeps the step's AdamW settings with every region pending
/// (its gradient sums kept: the next step's beginStep leaves them). A
/// region's update is the schedule's four steps: `fetchOptimizerState`
/// (h2d: its offloaded masters and moments into a staging buffer),
/// `optimizerStep` (AdamW on every tensor the region owns, on the slice
/// under ZeRO-1; with `stepUnderWay`, in a forward, its sums are then zeroed
/// for the step under way), `gatherUpdatedWeights` (g2g: ZeRO-1/2's
/// all-gather of the new slices) and `writeBackOptimizerState` (d2h: the
/// state and the new weights kept in host memory); each does nothing for a
/// region with no pending update or nothing of its kind to move. Its last
/// step records the event that the region's `acquire` waits for, so on GPUs
/// a layer's forward can start while later layers are still being updated.
/// `applyPendingStep` runs all four (false: none pending). The last region's
/// update ends the deferral (finishDeferred), and the job if a tensor was
/// left out.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/trainer/GradientSums.h"
#include "runtime/trainer/ParameterTable.h"

#include <map>
#include <memory>
#include <optional>

namespace mist::rt {

class OptimizerUpdate : ParameterView {
public:
  OptimizerUpdate(ParameterTable &table, GradientSums &gradients);

  void deferStep(const AdamStep &adam);
  bool hasPendingStep() const { return pendingStep.has_value(); }
  void fetchOptimizerState(StageRegion region);
  void optimizerStep(StageRegion region, bool stepUnderWay);
  void gatherUpdatedWeights(StageRegion region);
  void writeBackOptimizerState(StageRegion region);
  bool applyPendingStep(StageRegion region, bool stepUnderWay);
  /// Whether the region's update is pending or under way (its weights are
  /// not yet the ones the step computed).
  bool updateDue(StageRegion region) const;
  void finishDeferred();
  /// The staging of offloaded optimizer state, sized for the largest region
  /// and kept: allocated before the first step, so the first step holds
  /// what every later one does (the memory the model counts) and a plan
  /// that cannot hold it stops there.
  void reserveStaging();

private:
  /// A region's update between its schedule steps.
  struct RegionUpdate {
    StageRegion region;
    Copies members;
    std::vector<size_t> stagedAt;   ///< each member's offset in the staging buffers
    size_t staged = 0;              ///< elements of offloaded state staged
    bool inPlace = true;            ///< AdamW writes the weights themselves
    std::vector<DeviceTensor> next; ///< else the new weights (or slices), per member
    std::vector<char> resident;     ///< per member: its weights were resident before the gather
    bool fetched = false, stepped = false, gathered = false, written = false;
    Event last; ///< the last of its steps so far
  };
  /// The region's update under way, begun now if pending; null if neither.
  RegionUpdate *updateOf(StageRegion region);
  bool needsGather(const RegionUpdate &u) const;
  bool needsWriteBack(const RegionUpdate &u) const;
  void finishIfDone(RegionUpdate &u);

  GradientSums &gradients;
  std::optional<AdamStep> pendingStep;                     ///< deferStep's, until finishDeferred
  std::vector<char> pending;                               ///< per region (slot): not begun
  std::map<size_t, std::shared_ptr<RegionUpdate>> updates; ///< by slot: begun, not finished
  /// The offloaded tails of one region's optimizer state (masters, m, v),
  /// stepped here: the device part is stepped in place.
  DeviceTensor stagedMaster, stagedM, stagedV;
  Event stagingFree; ///< the last write-back out of the staging buffers
};

} // namespace mist::rt
