//===- StageRunner.h - The stage schedule's steps, one call each -----------===//
/// \file
/// What the emitted schedule of this rank's stage calls: one method per step
/// of schedule/Schedule.h (StepKind), in the order mistc priced them
/// (docs/schedule.md), between the brackets of each micro-batch's forward
/// and backward. Layers are named by the model's numbering. The steps run
/// the regions on the compute stream (their weights acquired, and dropped
/// after, by the parameter store), the pipeline messages on g2g (activations
/// re-sliced by runtime/comm/RankLayout's `reslice` when the stages' dp or
/// tp differ, the compute stream waiting for a received message's event),
/// gathers and reductions over dp on g2g, and offload copies on h2d and d2h.
/// Activation checkpointing: a checkpointed layer keeps only its input and
/// recomputes the rest before its backward.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/comm/ProcessGroups.h"
#include "runtime/data/BatchSampler.h"
#include "runtime/trainer/ActivationStash.h"
#include "runtime/trainer/ParameterStore.h"
#include "runtime/trainer/StageMemory.h"
#include "runtime/trainer/TpContext.h"
#include "runtime/trainer/TraceWriter.h"

namespace mist::rt {

class StageRunner {
public:
  StageRunner(const TrainerSpec &spec, ProcessGroups &groups, TpContext &tp, StageMemory &memory,
              ParameterStore &store, ActivationStash &stash, Streams &streams,
              const BatchSampler *sampler);

  /// After the step's work is enqueued: waits for it, and ends the job on a
  /// non-finite micro-batch loss (naming the first).
  void finishStep(int step);

  // A micro-batch's forward and backward through the stage's model chunk
  // `chunk` (0 unless the plan interleaves), around their steps: the
  // activations' slot and the data (tokens where pre runs, targets where
  // post runs), the gradient buffers the ops accumulate into and their fold
  // into the step's sums (what no fold step took). The pipeline messages in
  // between are the chunk's.
  void beginForward(int step, int mb, int chunk = 0);
  /// The slot keeps its activations (what is left of the tails to host).
  void endForward(int mb, int chunk = 0);
  void beginBackward(int mb, int chunk = 0);
  void endBackward(int mb, int chunk = 0);

  // The stage's own steps.
  void preOptimizerStep();  ///< the pending update of pre's weights
  void postOptimizerStep(); ///< and of post's
  void preForward(int mb);  ///< embeddings
  void receiveActivations(int mb);
  void postForward(int mb); ///< final norm, LM head, loss (checked by finishStep)
  void sendActivations(int mb);
  void postBackward(int mb);
  void receiveGradients(int mb);
  void preBackward(int mb);
  void sendGradients(int mb);
  /// Over dp, in the last backward: the step's sums, or ZeRO-2's last
  /// micro-batch into the slice.
  void reducePreGradients();
  void reducePostGradients();

  // A layer's steps (schedule/Schedule.h, layerSteps).
  void fetchOptimizerState(int layer);     ///< h2d: offloaded masters and moments
  void optimizerStep(int layer);           ///< AdamW on the layer (its ZeRO-1 slice), when pending
  void gatherUpdatedWeights(int layer);    ///< g2g: ZeRO-1/2's new slices all-gathered
  void writeBackOptimizerState(int layer); ///< d2h: offloaded state and weights
  void fetchWeights(int layer);            ///< h2d: the offloaded tail of its weights
  void gatherWeights(int layer);           ///< g2g: ZeRO-3's all-gather
  void forward(int layer, int mb);
  void swapOutActivations(int layer, int mb); ///< d2h: its saved activations' offloaded tail
  void swapInActivations(int layer);          ///< h2d: and back, for the backward under way
  void recompute(int layer, int mb);          ///< a checkpointed layer's forward again
  void backward(int layer, int mb);
  void reduceScatterGradients(int layer);    ///< g2g: ZeRO-2 every backward, ZeRO-1 the last
  void fetchGradientAccumulators(int layer); ///< h2d: the offloaded gradient sums
  void writeBackGradients(int layer);        ///< d2h: with this micro-batch's added
  void allReduceGradients(int layer);        ///< g2g: the last backward's, without ZeRO

  /// What is left of the last step's update, in the order the forward reads
  /// the weights: before a checkpoint is written and after the last step.
  void finishPendingUpdate();

  /// The sum of this rank's micro-batch losses this step (last stage only;
  /// after finishStep).
  double lossSum() const { return losses; }

private:
  void run(RegionFn fn, Frame &layer, const std::string &name);
  std::string layerName(int l) const;
  /// Moves `carried` into a run's input buffer, and a run's output into
  /// `carried` (StageRunner.cpp). The run allocates that output
  /// (Frame::allocate in train.cu).
  static void handIn(DeviceTensor &input, DeviceTensor &carried);
  static void handOut(DeviceTensor &output, DeviceTensor &carried);
  void receive(DeviceTensor &into, int mb, bool gradients);
  void send(const DeviceTensor &from, int mb, bool gradients);

  const TrainerSpec &spec;
  const StageSpec &stage;
  ProcessGroups &groups;
  TpContext &tp;
  StageMemory &memory;
  Frame &global;
  std::vector<Frame> &layers;
  ParameterStore &store;
  ActivationStash &stash;
  Streams &streams;
  const BatchSampler *sampler;
  int stageIndex;
  int runChunk = 0; ///< the chunk of the forward or backward under way
  /// The tag of a pipeline message of micro-batch `mb` sent by chunk
  /// `senderChunk` of its stage: unique per pair of ranks, direction and
  /// micro-batch, so several may be in flight.
  int tagOf(int mb, int senderChunk, bool gradients) const {
    return 2 * (mb * stage.chunks + senderChunk) + (gradients ? 1 : 0);
  }
  /// The stage's index of the model's layer `layer` (ends the job when
  /// the stage does not hold it: a hand-edited train.cu).
  int local(int layer) const;
  bool checkpointed(int l) const { return l >= stage.layers - stage.ckptLayers; }
  /// Whether layer l recomputes its norms and activation functions before
  /// its backward (selective recomputation, of a layer not checkpointed).
  bool recomputesSelectively(int l) const { return stage.selectiveRecompute && !checkpointed(l); }
  /// Ends the job when the region's weights are not yet the ones the last
  /// step's update computed (a schedule that uses them before its update).
  void requireUpdated(StageRegion region, const char *what);
  void loadData(int step, int mb);
  bool lastStage() const { return stageIndex + 1 == int(spec.stages.size()); }
  /// Whether pre's and post's fold of micro-batch `mb` is the last
  /// backward's reduction step (ZeRO-2) rather than part of their backward.
  bool foldedByReduction(int mb) const;
  int64_t samplesPerMicroBatch; ///< M = b dp, the same on every stage
  /// Sequence parallelism's tokens per sample (the activations between
  /// stages are split along them), else 0.
  int64_t splitTokens() const;
  /// The rows of the global micro-batch's activations this rank holds
  /// between stages (runtime/comm/RankLayout.h, activationRowsOf).
  SampleRange heldRows() const;
  std::vector<Transfer> recvForward, sendForward, recvBackward, sendBackward;
  std::vector<int> released; ///< a checkpointed layer's buffers freed after its forward
  std::vector<uint32_t> rowsIn, rowsOut;
  /// Per micro-batch of the step: its tokens, then its targets, in pinned memory.
  std::vector<HostArray<int32_t>> staging;
  DeviceTensor x, dx;        ///< the activations and their gradient between steps
  DeviceArray<float> mbLoss; ///< the step's micro-batch losses, read by finishStep
  DeviceArray<int32_t> rowsInDevice, rowsOutDevice;
  double losses = 0;
};

} // namespace mist::rt
