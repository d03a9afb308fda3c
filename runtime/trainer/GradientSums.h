//===- GradientSums.h - The step's gradient sums and their reduction ------===//
/// \file
/// The op wrappers accumulate a micro-batch's gradients into the parameter-
/// gradient buffers; the step's sums take them, and are reduced over dp:
/// - without ZeRO-2 a parameter with one buffer sums the micro-batches in
///   it (in place); its sum is all-reduced (or under ZeRO-1 reduce-scattered
///   into the rank's slice) right after the last backward of the region
///   reading it last (`reduceRegionGradients`, the schedule's
///   all-reduce-gradients / reduce-scatter-gradients step);
/// - ZeRO-2 (`gradsSliced`) and offloaded sums are folded region by region:
///   a region's buffers get zeroed memory before its backward
///   (`prepareGradBuffers`) and after it the schedule's fold steps add them
///   into the step's sums and free them, so full gradients exist for about
///   one region at a time: `scatterRegionGradients` reduce-scatters them
///   into this rank's slice (g2g), `fetchGradientSums` brings the offloaded
///   tails of the sums in (h2d) and `writeBackGradientSums` adds this
///   micro-batch's part and sends the tails back out (d2h).
///   `foldRegionGradients` runs what applies of the three (pre and post,
///   which have no steps of their own);
/// - `foldGradBuffers` (each micro-batch's end) and `reduceGradients` (the
///   step's end) do what no step did: parameters with several buffers, a
///   weight tied across the pipeline's end stages, summed over both, and
///   the partial gradients of sequence parallelism, summed over tp.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/trainer/ParameterTable.h"

#include <functional>

namespace mist::rt {

class GradientSums : ParameterView {
public:
  explicit GradientSums(ParameterTable &table);

  /// Step start: the sums to zero (but those an update still has to read).
  void beginStep();
  /// A parameter copy's sums to zero, where they live.
  void zeroSums(size_t p, size_t copy);
  /// Before a micro-batch's backward: the buffers the ops accumulate into.
  void clearGradBuffers();
  void foldGradBuffers();
  void prepareGradBuffers(StageRegion region);
  void scatterRegionGradients(StageRegion region);
  void fetchGradientSums(StageRegion region);
  void writeBackGradientSums(StageRegion region);
  void foldRegionGradients(StageRegion region);
  void reduceRegionGradients(StageRegion region);
  void reduceGradients();
  /// This rank's share of the squared global gradient norm: every element
  /// of the model is counted by exactly one rank of the job.
  double normSquaredShare();

private:
  /// What a region's fold steps take.
  Copies foldedBy(StageRegion region) const;
  void runFold(StreamKind stream, const std::string &what, StageRegion region,
               std::function<void(size_t, size_t)> work);
  void freeGradBuffers(size_t p, size_t copy);
  /// One micro-batch's gradient of a parameter copy: its buffers summed,
  /// under ZeRO-2 reduce-scattered into this rank's slice; empty for a
  /// parameter's one buffer, which addToSum reads as it is.
  DeviceTensor microBatchGradient(size_t p, size_t copy);
  void addToSum(size_t p, size_t copy, const DeviceTensor &gradient);
  void foldInto(size_t p, size_t copy); ///< one micro-batch's gradient into the step's sum
  /// Whether reduceRegionGradients sums this parameter copy over dp.
  bool reducedPerRegion(size_t p, size_t copy) const;
  /// A layer's gradients as one array when they are that (StageMemory) and
  /// `toReduce` is all of them: reduced by one collective; else null.
  DeviceTensor *wholeLayerGradients(StageRegion region, const Copies &toReduce);
  /// One parameter copy's step sum over dp: all-reduced, or under ZeRO-1
  /// reduce-scattered into the rank's slice.
  void reduceOverDp(size_t p, size_t copy);
  void sumTiedOverStages(size_t p, State &s);
  std::vector<Event> folded;   ///< per region (slot): its gradients' last fold
  DeviceArray<double> normSum; ///< normSquaredShare's accumulator
};

} // namespace mist::rt
