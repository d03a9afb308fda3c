//===- StageRunner.h - One stage's forward and backward of a micro-batch --===//
/// \file
/// The steps the emitted schedule of this rank's stage calls, one
/// micro-batch at a time, in the order of its 1F1B table: the data
/// (tokens on the first stage, targets on the last), the activations
/// received from the previous stage and sent to the next (re-sliced by
/// runtime/comm/RankLayout's `reslice` when their dp or tp differ), and the
/// gradients sent back the other way; activation checkpointing (a
/// checkpointed layer keeps only its input and recomputes the rest before
/// its backward); the parameter store's gathers and releases around every
/// region; the activation stash between a forward and its backward. Regions
/// run on the compute stream, messages on g2g, the compute stream waiting
/// for a received message's event.
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/comm/ProcessGroups.h"
#include "runtime/data/BatchSampler.h"
#include "runtime/trainer/ActivationStash.h"
#include "runtime/trainer/ParameterStore.h"
#include "runtime/trainer/ScheduleCheck.h"
#include "runtime/trainer/StageMemory.h"
#include "runtime/trainer/TpContext.h"
#include "runtime/trainer/TraceWriter.h"

namespace mist::rt {

class StageRunner {
public:
  StageRunner(const TrainerSpec &spec, ProcessGroups &groups, TpContext &tp, StageMemory &memory,
              ParameterStore &store, ActivationStash &stash, Streams &streams,
              const BatchSampler *sampler);

  /// Step start: whether the last step's optimizer update is pending (then
  /// the first forward runs it, group by group, and the schedule check
  /// expects its steps).
  void beginStep();
  /// After the step's work is enqueued: waits for it, and ends the job on a
  /// non-finite micro-batch loss (naming the first) or when the stage did not
  /// run its schedule's compute and pipeline steps in order (ScheduleCheck).
  void finishStep(int step);

  // The steps of a micro-batch's forward, in the order the emitted
  // `sN_forward` calls them (layer indices are the stage's, from 0).
  void beginForward(int mb);       ///< the micro-batch's activations get a slot
  void loadData(int step, int mb); ///< tokens on the first stage, targets on the last
  void receiveActivations(int mb); ///< from the previous stage, re-sliced
  /// Runs the region's pending optimizer update (the first forward of a
  /// step), waits for it, then makes its weights present (ZeRO-3
  /// all-gather, swap-in of the offloaded part).
  void acquireWeights(RegionKind region, int layer);
  void releaseWeights(RegionKind region, int layer);
  /// Starts bringing in the next region's weights beside this one's compute
  /// (ParameterStore::prefetch); its acquireWeights then waits for them.
  void prefetchWeights(RegionKind region, int layer);
  void forwardPre(int mb);
  void forwardLayer(int layer, int mb);
  void dropRecomputable(
      int layer); ///< a checkpointed layer keeps only its input (also after its backward)
  void forwardPost(int step, int mb); ///< the loss (checked by finishStep)
  void sendActivations(int mb);
  void stashActivations(int mb); ///< the slot keeps them (offloaded tail to host)

  // The steps of its backward (`sN_backward`).
  void unstashActivations(int mb);
  void clearGradients(); ///< the parameter-gradient buffers the ops accumulate into
  void backwardPost(int mb);
  void receiveGradients(int mb);
  void recomputeLayer(int layer, int mb);
  void backwardLayer(int layer, int mb);
  void backwardPre(int mb);
  void sendGradients(int mb);
  void foldGradients(); ///< into the step's sums (ZeRO-2: reduce-scattered)
  /// A region's gradient reduction over dp where the stage schedule places
  /// it (dp > 1): a layer's in every backward under ZeRO-2 (folded by its
  /// backward), else in the last one (ParameterStore::reduceRegionGradients);
  /// pre's and post's in the last backward. Nothing in other backwards.
  void reduceGradients(RegionKind region, int layer, int mb);

  /// The optimizer on one region's parameters when its update is still
  /// pending (`sN_optimizer`: the last step's update not yet run by a next
  /// forward, before a checkpoint or at the end).
  void optimizerStep(const AdamStep &adam, RegionKind region, int layer);

  /// The sum of this rank's micro-batch losses this step (last stage only;
  /// after finishStep).
  double lossSum() const { return losses; }

private:
  void run(RegionFn fn, Frame &layer, const std::string &name);
  std::string layerName(int layer) const;
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
  /// Runs the region's pending update, if any (true: it ran now).
  bool updateBeforeUse(RegionKind region, int layer);
  /// Brings a layer's offloaded activations back, and the next one's.
  void bringBackActivations(int layer);
  /// Groups (index group + 1) whose pending update this step's first forward
  /// ran, and whether its OptimizerStep was recorded for the check.
  std::vector<char> updatedThisStep, recordedUpdate;
  /// The steps run this training step, against the schedule mistc priced.
  ScheduleCheck check;
  int64_t samplesPerMicroBatch; ///< M = b dp, the same on every stage
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
