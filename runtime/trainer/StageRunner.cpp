//===- StageRunner.cpp - One stage's forward and backward of a micro-batch ===//
#include "runtime/trainer/StageRunner.h"

#include "runtime/comm/MpiCommunicator.h"
#include "runtime/trainer/Hash.h"
#include <algorithm>
#include <cmath>

namespace mist::rt {

namespace {

/// Sequence k of the synthetic data: a counting pattern with a per-sequence
/// start and stride, learnable (the next token follows from the last two).
void syntheticSequence(int64_t k, int seq, int vocab, int32_t *tokens, int32_t *targets) {
  uint64_t h = splitmix64(uint64_t(k) * 7919 + 17);
  int start = int(h % uint64_t(vocab)), stride = 1 + int((h >> 20) % 7);
  for (int t = 0; t < seq; ++t) {
    tokens[t] = int32_t((start + int64_t(t) * stride) % vocab);
    targets[t] = int32_t((start + int64_t(t + 1) * stride) % vocab);
  }
}

/// Message tags: one per micro-batch and direction, so a stage may have
/// several micro-batches' messages in flight.
int tagOf(int mb, bool gradients) { return 2 * mb + (gradients ? 1 : 0); }

} // namespace

StageRunner::StageRunner(const TrainerSpec &spec, ProcessGroups &groups, TpContext &tp,
                         StageMemory &memory, ParameterStore &store, ActivationStash &stash,
                         Streams &streams, const BatchSampler *sampler)
    : spec(spec), stage(spec.stages[size_t(groups.layout().stage)]), groups(groups), tp(tp),
      memory(memory), global(memory.global()), layers(memory.layers()), store(store), stash(stash),
      streams(streams), sampler(sampler), stageIndex(groups.layout().stage),
      check(scheduleOf(stage, stageIndex, int(spec.stages.size()), spec.gradAccum)) {
  samplesPerMicroBatch = int64_t(stage.microBatch) * stage.dp;
  const RankLayout &layout = groups.layout();
  const int me = layout.myWorldRank, stages = int(spec.stages.size());
  auto mine = [&](int from, int to, bool sending) {
    std::vector<Transfer> out;
    for (const Transfer &t : reslice(layout, from, to, samplesPerMicroBatch))
      if ((sending ? t.from : t.to) == me)
        out.push_back(t);
    return out;
  };
  if (stageIndex > 0) {
    recvForward = mine(stageIndex - 1, stageIndex, false);
    sendBackward = mine(stageIndex, stageIndex - 1, true);
  }
  if (stageIndex + 1 < stages) {
    sendForward = mine(stageIndex, stageIndex + 1, true);
    recvBackward = mine(stageIndex + 1, stageIndex, false);
  }
  released = memory.recomputed();
  // What travels between regions and stages has the activations' type.
  if (stage.layerIn >= 0) {
    x.setDType(stage.buffers[size_t(stage.layerIn)].dtype);
    dx.setDType(stage.buffers[size_t(stage.layerIn)].dtype);
  }
  rowsIn.resize(size_t(stage.microBatch) * size_t(spec.seqLen));
  rowsOut.resize(rowsIn.size());
  if (stage.lossBuffer >= 0)
    mbLoss.assignZeros(size_t(spec.gradAccum));
}

void StageRunner::finishStep(int step) {
  streams.synchronize();
  if (std::string problem = check.finishStep(); !problem.empty())
    abortJob("step " + std::to_string(step) + ": " + problem);
  losses = 0;
  if (stage.lossBuffer < 0)
    return;
  const std::vector<float> perMicroBatch = mbLoss.download();
  for (size_t mb = 0; mb < perMicroBatch.size(); ++mb) {
    if (!std::isfinite(perMicroBatch[mb]))
      abortJob("non-finite loss at step " + std::to_string(step) + ", micro-batch " +
               std::to_string(mb));
    losses += perMicroBatch[mb];
  }
}

void StageRunner::run(RegionFn fn, Frame &layer, const std::string &name) {
  streams.run(StreamKind::Compute, name, [&] { fn(global, layer, tp); });
}

// The activation (or gradient) a run hands to the next moves from buffer to
// buffer: the carried array is swapped in, and the run's output out, so no
// copy of it ever coexists with the arenas. A buffer that is a view of an
// arena (a region input the emitter placed in one) is copied into instead.
void StageRunner::handIn(DeviceTensor &input, DeviceTensor &carried) {
  if (input.isView())
    input = carried;
  else
    input.swap(carried);
  carried.clear();
}

void StageRunner::handOut(DeviceTensor &output, DeviceTensor &carried) {
  carried.clear();
  if (output.isView())
    carried = output;
  else
    carried.swap(output);
}

// The rows of this dp rank: samples [dpRank b, (dpRank + 1) b) of the
// micro-batch's M, whatever the other stages' split.
void StageRunner::loadData(int step, int mb) {
  const bool first = stage.tokensBuffer >= 0, last = stage.targetsBuffer >= 0;
  if (!first && !last)
    return;
  const int dpRank = groups.layout().dpRank;
  const int64_t firstSample = int64_t(dpRank) * stage.microBatch;
  const size_t n = rowsIn.size();
  // Pinned staging of this micro-batch's own, so the copies below need not
  // be waited for: no other micro-batch of the step writes it, and the step
  // ends with the device synchronized before the next one does.
  if (staging.size() < size_t(spec.gradAccum))
    staging.resize(size_t(spec.gradAccum));
  HostArray<int32_t> &rows = staging[size_t(mb)];
  rows.resize(2 * n);
  int32_t *tokens = rows.data(), *targets = rows.data() + n;
  if (sampler) {
    if (auto bad = sampler->fillSamples(step - 1, mb, firstSample, stage.microBatch, rowsIn.data(),
                                        rowsOut.data()))
      abortJob(*bad);
    for (size_t i = 0; i < n; ++i) {
      // Checked at open too; again here, since the file may change while
      // training, and a token past the vocabulary would index out of bounds.
      if (rowsIn[i] >= uint32_t(spec.vocab) || rowsOut[i] >= uint32_t(spec.vocab))
        abortJob("step " + std::to_string(step) + ", micro-batch " + std::to_string(mb) +
                 ": token " + std::to_string(std::max(rowsIn[i], rowsOut[i])) +
                 " is outside the model's vocabulary of " + std::to_string(spec.vocab) +
                 " (the token file changed while training?)");
      tokens[i] = int32_t(rowsIn[i]);
      targets[i] = int32_t(rowsOut[i]);
    }
  } else {
    for (int b = 0; b < stage.microBatch; ++b) {
      // Sequence k of the step's global batch.
      const int64_t k = int64_t(step - 1) * spec.gradAccum * samplesPerMicroBatch +
                        int64_t(mb) * samplesPerMicroBatch + firstSample + b;
      const size_t at = size_t(b) * size_t(spec.seqLen);
      syntheticSequence(k, spec.seqLen, spec.vocab, tokens + at, targets + at);
    }
  }
  // Copied on the compute stream, which then reads them.
  if (first)
    device::copy(global.ids(stage.tokensBuffer), tokens, n * sizeof(int32_t));
  if (last)
    device::copy(global.ids(stage.targetsBuffer), targets, n * sizeof(int32_t));
}

void StageRunner::receive(DeviceTensor &into, int mb, bool gradients) {
  const RankLayout &layout = groups.layout();
  const size_t perSample =
      size_t(stage.buffers[size_t(stage.layerIn)].elements) / size_t(stage.microBatch);
  into.assignZeros(perSample * size_t(stage.microBatch));
  const int64_t first = samplesOfDpRank(layout.dpRank, stage.dp, samplesPerMicroBatch).begin;
  streams.runFenced(
      StreamKind::G2G, (gradients ? "recv gradients " : "recv activations ") + std::to_string(mb),
      [&] {
        for (const Transfer &t : gradients ? recvBackward : recvForward)
          groups.pipeline().recv(into.at(size_t(t.samples.begin - first) * perSample).data,
                                 size_t(t.samples.size()) * perSample * bytesOf(into.dtype()),
                                 t.from, tagOf(mb, gradients));
      });
}

void StageRunner::send(const DeviceTensor &from, int mb, bool gradients) {
  const RankLayout &layout = groups.layout();
  const size_t perSample = from.size() / size_t(stage.microBatch);
  const int64_t first = samplesOfDpRank(layout.dpRank, stage.dp, samplesPerMicroBatch).begin;
  // Fenced: the next micro-batch's regions rewrite the buffer being sent.
  streams.runFenced(
      StreamKind::G2G, (gradients ? "send gradients " : "send activations ") + std::to_string(mb),
      [&] {
        for (const Transfer &t : gradients ? sendBackward : sendForward)
          groups.pipeline().postSend(from.at(size_t(t.samples.begin - first) * perSample).data,
                                     size_t(t.samples.size()) * perSample * bytesOf(from.dtype()),
                                     t.to, tagOf(mb, gradients));
      });
}

std::string StageRunner::layerName(int layer) const {
  return "layer " + std::to_string(stage.firstLayer + layer);
}

void StageRunner::receiveActivations(int mb) {
  check.record(StepKind::ReceiveActivations, -1, mb);
  receive(x, mb, false);
}

void StageRunner::beginStep() {
  check.expectOptimizerSteps(store.hasPendingStep());
  updatedThisStep.assign(size_t(stage.layers) + 2, 0);
  recordedUpdate.assign(size_t(stage.layers) + 2, 0);
}

// The last step's update of a region runs just before its weights are first
// wanted in this step's first forward: brought in early (prefetch) or used.
bool StageRunner::updateBeforeUse(RegionKind region, int layer) {
  const int group = store.groupOfRegion(region, layer);
  if (!store.applyPendingStep(group, /*stepUnderWay=*/true))
    return false;
  updatedThisStep[size_t(group + 1)] = 1;
  return true;
}

void StageRunner::prefetchWeights(RegionKind region, int layer) {
  updateBeforeUse(region, layer);
  store.prefetch(region, layer);
}

void StageRunner::acquireWeights(RegionKind region, int layer) {
  updateBeforeUse(region, layer);
  // Recorded where the forward waits for it: a layer's update is a step of
  // the schedule's first forward before the layer's own forward.
  const size_t g = size_t(store.groupOfRegion(region, layer) + 1);
  if (region == RegionKind::Layer && updatedThisStep[g] && !recordedUpdate[g]) {
    check.record(StepKind::OptimizerStep, layer, 0);
    recordedUpdate[g] = 1;
  }
  store.acquire(region, layer);
}

void StageRunner::releaseWeights(RegionKind region, int layer) { store.release(region, layer); }

// Each region run holds its scratch arena from just after its input moves in
// to just after its output moves out (StageMemory::enter/leave).

void StageRunner::forwardPre(int mb) {
  check.record(StepKind::PreForward, -1, mb);
  memory.enter(RegionKind::Pre, true);
  run(stage.preForward, layers[0], "pre F" + std::to_string(mb));
  handOut(global.vec(stage.preOut), x);
  memory.leave(RegionKind::Pre, true);
}

void StageRunner::forwardLayer(int layer, int mb) {
  // Offloaded activations go out a layer behind: the one before last while
  // this one computes (and drops what it recomputes), as the memory model
  // counts one layer's tail in flight beside each forward.
  if (layer >= 2)
    stash.saveLayer(mb, layer - 2);
  stash.prepareLayer(layer);
  check.record(StepKind::Forward, layer, mb);
  Frame &frame = layers[size_t(layer)];
  handIn(frame.vec(stage.layerIn), x);
  memory.enter(RegionKind::Layer, true);
  frame.dropRecomputed = layer >= stage.layers - stage.ckptLayers;
  run(stage.layerForward, frame, layerName(layer) + " F" + std::to_string(mb));
  frame.dropRecomputed = false;
  handOut(frame.vec(stage.layerOut), x);
  memory.leave(RegionKind::Layer, true);
}

void StageRunner::dropRecomputable(int layer) {
  for (int i : released)
    layers[size_t(layer)].vec(i).clear(); // recomputed before the backward
}

void StageRunner::forwardPost(int step, int mb) {
  check.record(StepKind::PostForward, -1, mb);
  handIn(global.vec(stage.postIn), x);
  memory.enter(RegionKind::Post, true);
  run(stage.postForward, layers[0], "post F" + std::to_string(mb));
  (void)step;
  // Kept on the device: reading it here would wait for the GPU every micro-batch.
  device::copy(mbLoss.data() + mb, global.at(stage.lossBuffer).f32(), sizeof(float));
  memory.leave(RegionKind::Post, true);
}

void StageRunner::sendActivations(int mb) {
  check.record(StepKind::SendActivations, -1, mb);
  send(x, mb, false);
  x.clear(); // sent (postSend copies): not kept until the next forward
}

void StageRunner::beginForward(int mb) {
  // The schedule runs pre's and post's updates first of the first forward.
  if (stageIndex == 0 && updateBeforeUse(RegionKind::Pre, 0))
    check.record(StepKind::PreOptimizerStep, -1, mb);
  if (stageIndex + 1 == int(spec.stages.size()) && updateBeforeUse(RegionKind::Post, 0))
    check.record(StepKind::PostOptimizerStep, -1, mb);
  stash.begin(mb);
}

void StageRunner::stashActivations(int mb) { stash.save(mb); }

void StageRunner::unstashActivations(int mb) { stash.restore(mb); }

void StageRunner::clearGradients() { store.clearGradBuffers(); }

void StageRunner::backwardPost(int mb) {
  check.record(StepKind::PostBackward, -1, mb);
  memory.enter(RegionKind::Post, false);
  store.prepareGradBuffers(RegionKind::Post, 0);
  global.vec(stage.postGradIn).assignZeros(1);
  device::fill(global.at(stage.postGradIn).f32(), 1, 1.f); // d loss / d loss
  run(stage.postBackward, layers[0], "post B" + std::to_string(mb));
  handOut(global.vec(stage.postGradOut), dx);
  memory.leave(RegionKind::Post, false);
  memory.freeGlobalSaved(stage.freedAfterPostBackward); // the logits, among others
  store.foldRegionGradients(RegionKind::Post, 0);
}

void StageRunner::receiveGradients(int mb) {
  check.record(StepKind::ReceiveGradients, -1, mb);
  receive(dx, mb, true);
}

// A layer's offloaded activations come back for its recompute or backward,
// and the next one's beside it (the one after it in the backward).
void StageRunner::bringBackActivations(int layer) {
  stash.restoreLayer(layer);
  if (layer > 0)
    stash.restoreLayer(layer - 1);
}

void StageRunner::recomputeLayer(int layer, int mb) {
  bringBackActivations(layer);
  check.record(StepKind::Recompute, layer, mb);
  Frame &frame = layers[size_t(layer)];
  memory.enter(RegionKind::Layer, true);
  run(stage.layerForward, frame, layerName(layer) + " R" + std::to_string(mb));
  if (!frame.vec(stage.layerOut).isView())
    frame.vec(stage.layerOut).clear(); // the next layer has its input already
  memory.leave(RegionKind::Layer, true);
}

void StageRunner::backwardLayer(int layer, int mb) {
  bringBackActivations(layer);
  check.record(StepKind::Backward, layer, mb);
  Frame &frame = layers[size_t(layer)];
  handIn(frame.vec(stage.layerGradIn), dx);
  store.prepareGradBuffers(RegionKind::Layer, layer);
  memory.enter(RegionKind::Layer, false);
  run(stage.layerBackward, frame, layerName(layer) + " B" + std::to_string(mb));
  handOut(frame.vec(stage.layerGradOut), dx);
  memory.leave(RegionKind::Layer, false);
  memory.freeLayerSaved(layer); // read by this backward only
  store.foldRegionGradients(RegionKind::Layer, layer);
}

void StageRunner::backwardPre(int mb) {
  check.record(StepKind::PreBackward, -1, mb);
  handIn(global.vec(stage.preGradIn), dx);
  store.prepareGradBuffers(RegionKind::Pre, 0);
  memory.enter(RegionKind::Pre, false);
  run(stage.preBackward, layers[0], "pre B" + std::to_string(mb));
  memory.leave(RegionKind::Pre, false);
  memory.freeGlobalSaved(); // the last backward of the micro-batch
  store.foldRegionGradients(RegionKind::Pre, 0);
}

void StageRunner::sendGradients(int mb) {
  check.record(StepKind::SendGradients, -1, mb);
  send(dx, mb, true);
  dx.clear();
}

void StageRunner::foldGradients() { store.foldGradBuffers(); }

void StageRunner::reduceGradients(RegionKind region, int layer, int mb) {
  if (stage.dp <= 1)
    return;
  const bool last = mb == spec.gradAccum - 1;
  if (region != RegionKind::Layer) {
    if (!last)
      return;
    if (!stage.zeroGrads)
      store.reduceRegionGradients(region, 0);
    check.record(region == RegionKind::Pre ? StepKind::ReducePreGradients
                                           : StepKind::ReducePostGradients,
                 -1, mb);
    return;
  }
  // The schedule's steps (schedule/Schedule.cpp, layerSteps): ZeRO-2 reduce-
  // scatters every backward's gradients, the others sum them in the last.
  if (stage.zeroGrads) {
    check.record(StepKind::ReduceScatterGradients, layer, mb);
  } else if (last) {
    store.reduceRegionGradients(region, layer);
    check.record(stage.zeroOptimizer ? StepKind::ReduceScatterGradients
                                     : StepKind::AllReduceGradients,
                 layer, mb);
  }
}

// The store keeps the deferred step's settings, which the caller passes too.
void StageRunner::optimizerStep(const AdamStep &, RegionKind region, int layer) {
  store.applyPendingStep(store.groupOfRegion(region, layer), /*stepUnderWay=*/false);
}

} // namespace mist::rt
