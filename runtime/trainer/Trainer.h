//===- Trainer.h - What an emitted train.cu hands to the runtime ----------===//
/// \file
/// The emitted trainer (backend/trainer/TrainerEmitter.cpp) describes every pipeline
/// stage of its plan as tables (buffers, parameters) and straight-line
/// functions, one per region and direction, that call the runtime's ops on
/// Frames; `runTrainer` does the rest: rank placement, parameter
/// initialization, data, the 1F1B order of micro-batches with activations
/// sent between stages (re-sliced when their dp or tp differ), gradient
/// reduction (all-reduce or ZeRO reduce-scatter), clipping, AdamW with warmup
/// and cosine decay, offload to host memory, checkpoints and logging.
/// docs/trainer-design.md tells the whole story.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Region.h"
#include "runtime/comm/Placement.h"
#include "runtime/device/DeviceArray.h"
#include "runtime/device/DeviceTensor.h"
#include "runtime/trainer/LrSchedule.h"
#include "stdlib/kernels/init/InitialValuesMath.h"
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace mist::rt {

enum class BufferKind { Float, Ids };

struct BufferSpec {
  const char *name;
  int64_t elements; ///< 0 for a buffer the stage never touches
  BufferKind kind;
  bool layer;   ///< owned by the repeated layer: one copy per layer
  bool forward; ///< read or written by the forward
  bool saved;   ///< of those, read by the backward: kept from a forward to its backward
  /// The run (2 x region + 1 for a backward; regions 0 pre, 1 layer, 2
  /// post) whose scratch arena holds this transient buffer
  /// (StageSpec::scratchBytes), and the offset in bytes, planned by
  /// liveness; -1: a buffer of its own.
  int scratchRun = -1;
  int64_t scratchOffset = -1;
  /// A Float buffer's element type: the IR value's (bf16 activations and
  /// weights of a bf16 plan, f32 statistics and loss), a parameter
  /// gradient's the plan's grad_dtype.
  DType dtype = DType::F32;
};

/// Which region of the model reads a parameter (format/Region.h).
using RegionKind = mist::RegionKind;

/// A parameter and the gradient buffers that contribute to it (a tied
/// weight gets one from each region that reads it).
struct ParamSpec {
  const char *name;
  int buffer;
  std::vector<int> grads;
  std::vector<int64_t> shape;  ///< full shape
  int shardAxis = -1;          ///< split over tp along this axis, or -1
  std::vector<int64_t> groups; ///< parts along the axis, each split evenly (fused q/k/v: 3)
  /// Regions reading it (a tied embedding: pre and post).
  std::vector<RegionKind> regions;
  /// Also held by another stage (a tied embedding on the first and last
  /// stage): its gradient is summed over both before the optimizer step.
  bool tiedAcrossStages = false;
  /// Its gradient is each tp rank's part of a sum: under sequence
  /// parallelism a norm or the position embedding sees this rank's tokens
  /// only. Summed over tp once per step, before the optimizer reads it.
  bool tpPartialGrad = false;
  /// AdamW decays it (the train section's no_decay leaves out biases,
  /// norms and embeddings by default).
  bool decay = true;
};

/// The index in the full tensor of element `local` of tp rank `rank`'s shard.
int64_t fullIndexOf(const ParamSpec &p, int rank, int tp, int64_t local);
/// The same map built once, for loops over a tensor:
/// kernels::math::fullIndex(shardMap(p, rank, tp), local) == fullIndexOf(...).
kernels::InitialValuesArgs shardMap(const ParamSpec &p, int rank, int tp);

/// What the generated code sees of one layer's buffers (or of pre and
/// post): a view of device arrays that runtime/trainer/StageMemory.h owns
/// and binds (an activation buffer points into the slot of the micro-batch
/// being computed).
class Frame {
public:
  explicit Frame(size_t buffers) : floats(buffers, nullptr), ints(buffers, nullptr) {}
  /// Buffer i as a typed device pointer (null when it has no memory).
  Tensor at(int i) {
    DeviceTensor *t = floats[size_t(i)];
    return t ? t->at(0) : Tensor();
  }
  int32_t *ids(int i) { return ints[size_t(i)] ? ints[size_t(i)]->data() : nullptr; }
  /// The array behind buffer i; one the frame does not hold ends the job.
  DeviceTensor &vec(int i);
  DeviceArray<int32_t> &idVec(int i);
  void bind(int i, DeviceTensor *array) { floats[size_t(i)] = array; }
  void bindIds(int i, DeviceArray<int32_t> *array) { ints[size_t(i)] = array; }
  /// Frees a saved activation after its last read in a backward (the
  /// emitter places these calls); its slot gets memory again when the next
  /// forward into it begins (StageMemory::refillSlot).
  void release(int i);
  /// Gives buffer i memory for n elements if it has none: a buffer one run
  /// hands to the next, allocated right before the op that writes it.
  void allocate(int i, int64_t n);
  /// In the first forward of a checkpointed layer, frees buffer i after its
  /// last forward read: the backward recomputes it (StageRunner marks that
  /// forward with dropRecomputed); otherwise does nothing. A buffer that
  /// selective recomputation writes again (`selectively`) is freed also in
  /// the forward of a layer that recomputes selectively (dropSelective).
  void releaseIfRecomputed(int i, bool selectively = false) {
    if (dropRecomputed || (selectively && dropSelective))
      release(i);
  }
  bool dropRecomputed = false, dropSelective = false;
  /// A layer's weight gradients as one array, where StageMemory keeps them
  /// so (summed in place for the step): empty otherwise.
  DeviceTensor allGradients;

private:
  std::vector<DeviceTensor *> floats;
  std::vector<DeviceArray<int32_t> *> ints;
};

class TpContext;
using RegionFn = void (*)(Frame &global, Frame &layer, TpContext &tp);

class StageRunner;
/// A stage's iteration as emitted from its schedule (schedule/Schedule.h):
/// the 1F1B order of the step's micro-batches, each forward and backward a
/// sequence of StageRunner calls, one per scheduled step.
using IterationFn = void (*)(StageRunner &r, int step);

/// One pipeline stage: its layers, mesh, knobs, the lowered code at its
/// micro-batch and tp, and its schedule. Region functions a stage does not
/// run are null (pre runs on the first stage only, post on the last).
struct StageSpec {
  int firstLayer = 0, layers = 1; ///< global index of the first layer, and the count
  /// Interleaved 1F1B: the stage holds `chunks` model chunks of layers /
  /// chunks layers each, chunk c starting at model layer firstLayer + c *
  /// chunkStride (chunk c of stage i is the model's chunk c S + i).
  int chunks = 1, chunkStride = 0;
  /// The model's number of the stage's layer `l` (0 <= l < layers).
  int globalLayer(int l) const {
    const int perChunk = layers / chunks;
    return firstLayer + (l / perChunk) * chunkStride + l % perChunk;
  }
  /// The stage's index of the model's layer `layer`, or -1 when the stage
  /// does not hold it.
  int localLayer(int layer) const {
    const int perChunk = layers / chunks, from = layer - firstLayer;
    const int chunk = chunks == 1 ? 0 : (from >= 0 ? from / chunkStride : -1),
              within = chunks == 1 ? from : from - chunk * chunkStride;
    if (from < 0 || chunk >= chunks || within < 0 || within >= perChunk)
      return -1;
    return chunk * perChunk + within;
  }
  /// "layers 4-7", or with chunks "layers 2-3, 6-7".
  std::string layerRanges() const {
    std::string text;
    const int perChunk = layers / chunks;
    for (int c = 0; c < chunks; ++c) {
      const int first = globalLayer(c * perChunk);
      text += (c ? ", " : "layers ") + std::to_string(first) + "-" +
              std::to_string(first + perChunk - 1);
    }
    return text;
  }
  int microBatch = 1;
  int dp = 1, tp = 1; ///< ranks of the stage: dp x tp, tp innermost
  int ckptLayers = 0; ///< the last ckptLayers layers keep only their input and recompute
  /// Selective recomputation (plan key selective_recompute): the layers not
  /// checkpointed drop `selectiveBuffers` (their norms' and activation
  /// functions' outputs) after the forward, and `layerRecomputeSelective`
  /// writes them again before the backward.
  bool selectiveRecompute = false;
  std::vector<int> selectiveBuffers;
  StageMesh mesh; ///< the plan's nodes x GPUs per node for the stage
  /// The scratch arenas of the forward and backward runs of pre, layer and
  /// post (2 x region + 1 for a backward), each held while such a run goes on.
  std::array<int64_t, 6> scratchBytes{};
  /// Saved activations of the global frame that only post's backward reads:
  /// freed after it (the others after pre's backward; a layer's after its own).
  std::vector<int> freedAfterPostBackward;
  bool zeroOptimizer = false; ///< ZeRO-1: fp32 masters and Adam moments split over dp
  bool zeroGrads = false;     ///< ZeRO-2: gradient sums split over dp too
  bool zeroWeights = false;   ///< ZeRO-3: weights split over dp, gathered around each use
  /// Offload fractions (0..1): the tail of every such tensor lives in host memory.
  double offloadWeights = 0, offloadGrads = 0, offloadOptimizer = 0, offloadActivations = 0;
  std::vector<BufferSpec> buffers;
  std::vector<ParamSpec> params;
  int tokensBuffer = -1, targetsBuffer = -1, lossBuffer = -1;
  int preOut = -1, layerIn = -1, layerOut = -1, postIn = -1; ///< activations between regions
  int postGradIn = -1, postGradOut = -1, layerGradIn = -1, layerGradOut = -1, preGradIn = -1;
  RegionFn preForward = nullptr, layerForward = nullptr, postForward = nullptr;
  RegionFn postBackward = nullptr, layerBackward = nullptr, preBackward = nullptr;
  RegionFn layerRecomputeSelective = nullptr;
  IterationFn iteration = nullptr; ///< the step's forwards and backwards
};

struct TrainerSpec {
  std::string model, plan;
  std::vector<StageSpec> stages;
  int seqLen = 1, vocab = 1, gradAccum = 1;
  /// Sequence parallelism (the plan's sequence_parallel): the activations
  /// between regions and stages are each tp rank's part of the tokens.
  bool sequenceParallel = false;
  double modelFlopsPerSample = 0; ///< model FLOPs of one sequence, forward and backward
  /// The plan's predicted iteration time (what the tuner minimized), for
  /// the metrics log; 0: none.
  double predictedStepSeconds = 0;
  /// The device the plan was made for and its dense bf16 peak: the log's MFU
  /// is model FLOP/s per rank over this, when the job runs on that device
  /// (on CPU ranks and other GPUs the log shows no MFU).
  std::string device;
  double devicePeakTflops = 0;
  /// The cluster the plan was made for: the job's hosts are checked against
  /// it and the stages' meshes at start (runtime/comm/Placement.h).
  PlannedCluster cluster;
  // Training setup from the model's train section.
  float lr = 3e-4f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weightDecay = 0.1f, gradClip = 1.f;
  int warmupSteps = 0;
  /// After warmup (runtime/trainer/LrSchedule.h): the decay, its floor (< 0:
  /// a tenth of lr) and, for wsd, the decaying fraction of the steps.
  LrDecay lrDecay = LrDecay::Cosine;
  float minLr = -1, decayFraction = 0.2f;
  /// The plan's precision (the buffers' own types follow it): weights and
  /// activations, and weight gradients; masters and moments are fp32.
  DType weightDtype = DType::F32, gradDtype = DType::F32;
};

/// Parses the trainer's flags (runtime/trainer/Options.h) and trains.
/// Returns the process exit status. Checkpoints are safetensors files with
/// full tensors (parameters, fp32 master weights, Adam moments) and the
/// step; `--resume` continues from DIR/latest.safetensors under any plan.
int runTrainer(const TrainerSpec &spec, int argc, char **argv);

/// The initial value of element `index` of parameter `name` (layer `layer`):
/// a pure function of (seed, name, layer, index), so every plan, and every
/// rank holding any part of the tensor, starts from the same model.
float initialValue(const std::string &name, int layer, int64_t index, uint64_t seed);
/// What initialValue decides once per tensor: a constant (biases 0, norm
/// weights 1) or the key of the tensor's random stream.
struct InitialStream {
  bool constant;
  float value;
  uint64_t key;
};
InitialStream initialStream(const std::string &name, int layer, uint64_t seed);
float initialValue(const InitialStream &stream, int64_t index);
/// What ops::drawInitialValues needs to draw local element i of tp rank
/// `rank`'s shard of `p` (layer `layer`) into out[i], i < n: the values of
/// initialValue at fullIndexOf.
kernels::InitialValuesArgs initialValuesArgs(const ParamSpec &p, int rank, int tp, int layer,
                                             uint64_t seed, float *out, size_t n);
/// Threads for a rank's initial values: the host's cores shared among its
/// `ranksOnHost` ranks. They may run on any of those cores, whatever core a
/// launcher bound the rank to (Open MPI binds a lone rank to one core, where
/// GPT-3 1.3B's values alone took over 50 s).
int initialValueThreads(int ranksOnHost);

} // namespace mist::rt
