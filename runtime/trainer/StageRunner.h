//===- StageRunner.h - One stage's forward and backward of a micro-batch --===//
/// \file
/// Runs the generated region functions of this rank's stage for one
/// micro-batch at a time, in the order of the emitted 1F1B table: the data
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
#include "runtime/trainer/TpContext.h"
#include "runtime/trainer/TraceWriter.h"

namespace mist::rt {

class StageRunner {
public:
  StageRunner(const TrainerSpec &spec, ProcessGroups &groups, TpContext &tp, Frame &global,
              std::vector<Frame> &layers, ParameterStore &store, ActivationStash &stash,
              Streams &streams, const BatchSampler *sampler);

  /// Step start: the loss sum to zero.
  void beginStep() { losses = 0; }
  void forward(int step, int mb);
  void backward(int mb);
  /// The sum of this rank's micro-batch losses this step (last stage only).
  double lossSum() const { return losses; }

private:
  void fillData(int step, int mb);
  void run(RegionFn fn, Frame &layer, const std::string &name);
  void allocateReleased(Frame &layer);
  void receive(std::vector<float> &into, int mb, bool gradients);
  void send(const std::vector<float> &from, int mb, bool gradients);

  const TrainerSpec &spec;
  const StageSpec &stage;
  ProcessGroups &groups;
  TpContext &tp;
  Frame &global;
  std::vector<Frame> &layers;
  ParameterStore &store;
  ActivationStash &stash;
  Streams &streams;
  const BatchSampler *sampler;
  int stageIndex;
  int64_t samplesPerMicroBatch; ///< M = b dp, the same on every stage
  std::vector<Transfer> recvForward, sendForward, recvBackward, sendBackward;
  std::vector<int> released; ///< a checkpointed layer's buffers freed after its forward
  std::vector<uint32_t> rowsIn, rowsOut;
  double losses = 0;
};

} // namespace mist::rt
