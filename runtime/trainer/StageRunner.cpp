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

} // namespace

StageRunner::StageRunner(const TrainerSpec &spec, ProcessGroups &groups, TpContext &tp,
                         StageMemory &memory, ParameterStore &store, ActivationStash &stash,
                         Streams &streams, const BatchSampler *sampler)
    : spec(spec), stage(spec.stages[size_t(groups.layout().stage)]), groups(groups), tp(tp),
      memory(memory), global(memory.global()), layers(memory.layers()), store(store), stash(stash),
      streams(streams), sampler(sampler), stageIndex(groups.layout().stage) {
  samplesPerMicroBatch = int64_t(stage.microBatch) * stage.dp;
  const RankLayout &layout = groups.layout();
  const int me = layout.myWorldRank, stages = int(spec.stages.size());
  auto mine = [&](int from, int to, bool sending) {
    std::vector<Transfer> out;
    for (const Transfer &t : reslice(layout, from, to, samplesPerMicroBatch, splitTokens()))
      if ((sending ? t.from : t.to) == me)
        out.push_back(t);
    return out;
  };
  // Interleaved, the stages form a ring: the last stage's chunk feeds the
  // first stage's next one.
  const bool ring = stage.chunks > 1;
  if (stageIndex > 0 || ring) {
    const int prev = (stageIndex + stages - 1) % stages;
    recvForward = mine(prev, stageIndex, false);
    sendBackward = mine(stageIndex, prev, true);
  }
  if (stageIndex + 1 < stages || ring) {
    const int next = (stageIndex + 1) % stages;
    sendForward = mine(stageIndex, next, true);
    recvBackward = mine(next, stageIndex, false);
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
  const bool first = stage.tokensBuffer >= 0 && runChunk == 0,
             last = stage.targetsBuffer >= 0 && runChunk == stage.chunks - 1;
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

int64_t StageRunner::splitTokens() const { return spec.sequenceParallel ? spec.seqLen : 0; }

SampleRange StageRunner::heldRows() const {
  const RankLayout &layout = groups.layout();
  return activationRowsOf(layout.stages[size_t(stageIndex)], layout.dpRank, layout.tpRank,
                          samplesPerMicroBatch, splitTokens());
}

void StageRunner::receive(DeviceTensor &into, int mb, bool gradients) {
  const SampleRange held = heldRows();
  const size_t elements = size_t(stage.buffers[size_t(stage.layerIn)].elements);
  const size_t perRow = elements / size_t(held.size());
  into.assignZeros(elements);
  const int64_t first = held.begin;
  // Activations come from the previous model chunk, gradients from the next:
  // across the ring's seam that is the other end stage's chunk before or after.
  const int senderChunk = gradients ? (lastStage() ? runChunk + 1 : runChunk)
                                    : (stageIndex == 0 ? runChunk - 1 : runChunk);
  streams.runFenced(
      StreamKind::G2G, (gradients ? "recv gradients " : "recv activations ") + std::to_string(mb),
      [&] {
        for (const Transfer &t : gradients ? recvBackward : recvForward)
          groups.pipeline().recv(into.at(size_t(t.rows.begin - first) * perRow).data,
                                 size_t(t.rows.size()) * perRow * bytesOf(into.dtype()), t.from,
                                 tagOf(mb, senderChunk, gradients));
      });
}

void StageRunner::send(const DeviceTensor &from, int mb, bool gradients) {
  const SampleRange held = heldRows();
  const size_t perRow = from.size() / size_t(held.size());
  const int64_t first = held.begin;
  // Fenced: the next micro-batch's regions rewrite the buffer being sent.
  streams.runFenced(
      StreamKind::G2G, (gradients ? "send gradients " : "send activations ") + std::to_string(mb),
      [&] {
        for (const Transfer &t : gradients ? sendBackward : sendForward)
          groups.pipeline().postSend(from.at(size_t(t.rows.begin - first) * perRow).data,
                                     size_t(t.rows.size()) * perRow * bytesOf(from.dtype()), t.to,
                                     tagOf(mb, runChunk, gradients));
      });
}

std::string StageRunner::layerName(int l) const {
  return "layer " + std::to_string(stage.globalLayer(l));
}

int StageRunner::local(int layer) const {
  const int l = stage.localLayer(layer);
  if (l < 0)
    abortJob("stage " + std::to_string(stageIndex) + "'s schedule names layer " +
             std::to_string(layer) + ", which is not on the stage (" + stage.layerRanges() + ")");
  return l;
}

void StageRunner::requireUpdated(StageRegion region, const char *what) {
  if (store.optimizer.updateDue(region))
    abortJob("stage " + std::to_string(stageIndex) + "'s schedule runs the " + what + " of " +
             (region.kind == RegionKind::Layer ? layerName(region.layer)
              : region.kind == RegionKind::Pre ? std::string("pre")
                                               : std::string("post")) +
             " before its optimizer step");
}

// ---- A micro-batch's brackets.

void StageRunner::beginForward(int step, int mb, int chunk) {
  runChunk = chunk;
  stash.begin(mb, chunk);
  loadData(step, mb);
}

void StageRunner::endForward(int mb, int chunk) { stash.save(mb, chunk); }

void StageRunner::beginBackward(int mb, int chunk) {
  runChunk = chunk;
  stash.restore(mb, chunk);
  store.gradients.clearGradBuffers();
}

void StageRunner::endBackward(int, int) { store.gradients.foldGradBuffers(); }

// ---- The stage's own steps. Each region run holds its scratch arena from
// just after its input moves in to just after its output moves out
// (StageMemory::enter/leave); pre's and post's weights, which have no steps
// of their own, are brought beside the layer next to them.

void StageRunner::preOptimizerStep() {
  store.optimizer.applyPendingStep(StageRegion::pre(), /*stepUnderWay=*/true);
}

void StageRunner::postOptimizerStep() {
  store.optimizer.applyPendingStep(StageRegion::post(), /*stepUnderWay=*/true);
}

void StageRunner::preForward(int mb) {
  requireUpdated(StageRegion::pre(), "forward");
  store.weights.acquire(StageRegion::pre());
  memory.enter(RegionKind::Pre, true);
  run(stage.preForward, layers[0], "pre F" + std::to_string(mb));
  handOut(global.vec(stage.preOut), x);
  memory.leave(RegionKind::Pre, true);
  store.weights.release(StageRegion::pre());
}

void StageRunner::receiveActivations(int mb) { receive(x, mb, false); }

void StageRunner::postForward(int mb) {
  requireUpdated(StageRegion::post(), "forward");
  store.weights.acquire(StageRegion::post());
  handIn(global.vec(stage.postIn), x);
  memory.enter(RegionKind::Post, true);
  run(stage.postForward, layers[0], "post F" + std::to_string(mb));
  // Kept on the device: reading it here would wait for the GPU every micro-batch.
  device::copy(mbLoss.data() + mb, global.at(stage.lossBuffer).f32(), sizeof(float));
  memory.leave(RegionKind::Post, true);
  store.weights.release(StageRegion::post());
}

void StageRunner::sendActivations(int mb) {
  send(x, mb, false);
  x.clear(); // sent (postSend copies): not kept until the next forward
}

void StageRunner::postBackward(int mb) {
  store.weights.acquire(StageRegion::post());
  memory.enter(RegionKind::Post, false);
  store.gradients.prepareGradBuffers(StageRegion::post());
  global.vec(stage.postGradIn).assignZeros(1);
  device::fill(global.at(stage.postGradIn).f32(), 1, 1.f); // d loss / d loss
  run(stage.postBackward, layers[0], "post B" + std::to_string(mb));
  handOut(global.vec(stage.postGradOut), dx);
  memory.leave(RegionKind::Post, false);
  memory.freeGlobalSaved(stage.freedAfterPostBackward); // the logits, among others
  store.weights.release(StageRegion::post());
  if (!foldedByReduction(mb))
    store.gradients.foldRegionGradients(StageRegion::post());
}

void StageRunner::receiveGradients(int mb) { receive(dx, mb, true); }

void StageRunner::preBackward(int mb) {
  store.weights.acquire(StageRegion::pre());
  handIn(global.vec(stage.preGradIn), dx);
  store.gradients.prepareGradBuffers(StageRegion::pre());
  memory.enter(RegionKind::Pre, false);
  run(stage.preBackward, layers[0], "pre B" + std::to_string(mb));
  memory.leave(RegionKind::Pre, false);
  memory.freeGlobalSaved(); // the last backward of the micro-batch
  store.weights.release(StageRegion::pre());
  if (!foldedByReduction(mb))
    store.gradients.foldRegionGradients(StageRegion::pre());
}

void StageRunner::sendGradients(int mb) {
  send(dx, mb, true);
  dx.clear();
}

// Without ZeRO-2 the step's sums over dp; under it, the last micro-batch's
// reduce-scatter into the slice (the earlier ones ran after their backward).
bool StageRunner::foldedByReduction(int mb) const {
  return stage.zeroGrads && stage.dp > 1 && mb == spec.gradAccum - 1;
}

void StageRunner::reducePreGradients() {
  if (stage.zeroGrads)
    store.gradients.foldRegionGradients(StageRegion::pre());
  else
    store.gradients.reduceRegionGradients(StageRegion::pre());
}

void StageRunner::reducePostGradients() {
  if (stage.zeroGrads)
    store.gradients.foldRegionGradients(StageRegion::post());
  else
    store.gradients.reduceRegionGradients(StageRegion::post());
}

// ---- A layer's steps.

void StageRunner::fetchOptimizerState(int layer) {
  store.optimizer.fetchOptimizerState(StageRegion::ofLayer(local(layer)));
}

void StageRunner::optimizerStep(int layer) {
  store.optimizer.optimizerStep(StageRegion::ofLayer(local(layer)), /*stepUnderWay=*/true);
}

void StageRunner::gatherUpdatedWeights(int layer) {
  store.optimizer.gatherUpdatedWeights(StageRegion::ofLayer(local(layer)));
}

void StageRunner::writeBackOptimizerState(int layer) {
  store.optimizer.writeBackOptimizerState(StageRegion::ofLayer(local(layer)));
}

void StageRunner::fetchWeights(int layer) {
  store.weights.fetchWeights(StageRegion::ofLayer(local(layer)));
}

void StageRunner::gatherWeights(int layer) {
  store.weights.gatherWeights(StageRegion::ofLayer(local(layer)));
}

void StageRunner::forward(int layer, int mb) {
  const int l = local(layer);
  requireUpdated(StageRegion::ofLayer(l), "forward");
  if (lastStage() && l + 1 == stage.layers)
    store.weights.prefetch(StageRegion::post());
  stash.prepareLayer(l);
  store.weights.acquire(StageRegion::ofLayer(l));
  Frame &frame = layers[size_t(l)];
  handIn(frame.vec(stage.layerIn), x);
  memory.enter(RegionKind::Layer, true);
  frame.dropRecomputed = checkpointed(l);
  frame.dropSelective = recomputesSelectively(l);
  run(stage.layerForward, frame, layerName(l) + " F" + std::to_string(mb));
  frame.dropRecomputed = frame.dropSelective = false;
  handOut(frame.vec(stage.layerOut), x);
  memory.leave(RegionKind::Layer, true);
  store.weights.release(StageRegion::ofLayer(l));
  if (checkpointed(l))
    for (int i : released)
      frame.vec(i).clear(); // recomputed before the backward
  if (recomputesSelectively(l))
    for (int i : stage.selectiveBuffers)
      frame.vec(i).clear(); // written again before the backward
}

void StageRunner::swapOutActivations(int layer, int mb) { stash.saveLayer(mb, local(layer)); }

void StageRunner::swapInActivations(int layer) { stash.restoreLayer(local(layer)); }

void StageRunner::recompute(int layer, int mb) {
  const int l = local(layer);
  if (stageIndex == 0 && l == 0)
    store.weights.prefetch(StageRegion::pre()); // beside layer 0's recompute and backward
  store.weights.acquire(StageRegion::ofLayer(l));
  Frame &frame = layers[size_t(l)];
  memory.enter(RegionKind::Layer, true);
  run(stage.layerForward, frame, layerName(l) + " R" + std::to_string(mb));
  if (!frame.vec(stage.layerOut).isView())
    frame.vec(stage.layerOut).clear(); // the next layer has its input already
  memory.leave(RegionKind::Layer, true);
}

void StageRunner::backward(int layer, int mb) {
  const int l = local(layer);
  if (stageIndex == 0 && l == 0 && !checkpointed(l)) // else with the recompute
    store.weights.prefetch(StageRegion::pre());
  store.weights.acquire(StageRegion::ofLayer(l));
  Frame &frame = layers[size_t(l)];
  if (recomputesSelectively(l)) // its norms' and activations' outputs, again
    run(stage.layerRecomputeSelective, frame, layerName(l) + " S" + std::to_string(mb));
  handIn(frame.vec(stage.layerGradIn), dx);
  store.gradients.prepareGradBuffers(StageRegion::ofLayer(l));
  memory.enter(RegionKind::Layer, false);
  run(stage.layerBackward, frame, layerName(l) + " B" + std::to_string(mb));
  handOut(frame.vec(stage.layerGradOut), dx);
  memory.leave(RegionKind::Layer, false);
  memory.freeLayerSaved(l); // read by this backward only
  store.weights.release(StageRegion::ofLayer(l));
}

void StageRunner::reduceScatterGradients(int layer) {
  const int l = local(layer);
  if (stage.zeroGrads) // this micro-batch's, into the slice
    store.gradients.scatterRegionGradients(StageRegion::ofLayer(l));
  else // ZeRO-1: the step's sums, after the last backward
    store.gradients.reduceRegionGradients(StageRegion::ofLayer(l));
}

void StageRunner::fetchGradientAccumulators(int layer) {
  store.gradients.fetchGradientSums(StageRegion::ofLayer(local(layer)));
}

void StageRunner::writeBackGradients(int layer) {
  store.gradients.writeBackGradientSums(StageRegion::ofLayer(local(layer)));
}

void StageRunner::allReduceGradients(int layer) {
  store.gradients.reduceRegionGradients(StageRegion::ofLayer(local(layer)));
}

void StageRunner::finishPendingUpdate() {
  // The order the forward reads the weights in.
  store.optimizer.applyPendingStep(StageRegion::pre(), /*stepUnderWay=*/false);
  for (int l = 0; l < stage.layers; ++l)
    store.optimizer.applyPendingStep(StageRegion::ofLayer(l), /*stepUnderWay=*/false);
  store.optimizer.applyPendingStep(StageRegion::post(), /*stepUnderWay=*/false);
}

} // namespace mist::rt
