//===- Trainer.h - What an emitted train.cu hands to the runtime ----------===//
/// \file
/// The emitted trainer (backend/TrainerEmitter.cpp) describes its model as
/// tables (buffers, parameters) and straight-line functions, one per region
/// and direction, that call the runtime's ops on a Frame; `runTrainer` does
/// the rest: parameter initialization, data, gradient accumulation over the
/// plan's micro-batches, clipping, AdamW with warmup and cosine decay, and
/// logging. This version runs plans of one stage with any dp and tp (one MPI
/// rank each; tp ranks consecutive; gradients all-reduced over dp); the rest
/// of the multi-rank schedule follows docs/trainer-design.md.
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mist::rt {

enum class BufferKind { Float, Ids };

struct BufferSpec {
  const char *name;
  int64_t elements;
  BufferKind kind;
  bool layer; ///< owned by the repeated layer: one copy per layer
};

/// A parameter and the gradient buffers that contribute to it (a tied
/// weight gets one from each region that reads it).
struct ParamSpec {
  const char *name;
  int buffer;
  std::vector<int> grads;
  std::vector<int64_t> shape;  ///< full shape
  int shardAxis = -1;          ///< split over tp along this axis, or -1
  std::vector<int64_t> groups; ///< parts along the axis, each split evenly (fused q/k/v: 3)
};

/// The index in the full tensor of element `local` of tp rank `rank`'s shard.
int64_t fullIndexOf(const ParamSpec &p, int rank, int tp, int64_t local);

/// The buffers of one layer (or of pre and post): every buffer's storage.
class Frame {
public:
  /// A layer frame holds the layer's buffers, the global frame the others.
  Frame(const std::vector<BufferSpec> &buffers, bool layerFrame);
  float *at(int i) { return floats[i].data(); }
  int32_t *ids(int i) { return ints[i].data(); }
  std::vector<float> &vec(int i) { return floats[i]; }

private:
  std::vector<std::vector<float>> floats;
  std::vector<std::vector<int32_t>> ints;
};

class TpContext;
using RegionFn = void (*)(Frame &global, Frame &layer, TpContext &tp);

struct TrainerSpec {
  std::string model, plan;
  std::vector<BufferSpec> buffers;
  std::vector<ParamSpec> params;
  int layers = 1, microBatch = 1, seqLen = 1, vocab = 1, gradAccum = 1;
  int dp = 1;                 ///< data-parallel ranks: the job must have dp x tp ranks
  int tp = 1;                 ///< tensor-parallel ranks (consecutive world ranks)
  int ckptLayers = 0;         ///< the last ckptLayers layers keep only their input and recompute
  bool zeroOptimizer = false; ///< ZeRO-1: fp32 masters and Adam moments split over dp
  bool zeroGrads = false;     ///< ZeRO-2 (with zeroOptimizer): gradient sums split over dp too
  double modelFlopsPerSample = 0; ///< model FLOPs of one sequence, forward and backward
  int tokensBuffer = -1, targetsBuffer = -1, lossBuffer = -1;
  int preOut = -1, layerIn = -1, layerOut = -1, postIn = -1; ///< activations between regions
  int postGradIn = -1, postGradOut = -1, layerGradIn = -1, layerGradOut = -1, preGradIn = -1;
  RegionFn preForward = nullptr, layerForward = nullptr, postForward = nullptr;
  RegionFn postBackward = nullptr, layerBackward = nullptr, preBackward = nullptr;
  // Training setup from the model's train section.
  float lr = 3e-4f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weightDecay = 0.1f, gradClip = 1.f;
  int warmupSteps = 0;
};

/// Parses the trainer's flags (--steps N, --lr X, --seed N, --log-every N,
/// --data FILE (an llm.c-style token file; else --synthetic data),
/// --ckpt-dir DIR, --ckpt-every N, --resume, --trace FILE) and trains.
/// Returns the process exit status. Checkpoints are safetensors files with
/// full tensors (parameters, fp32 master weights, Adam moments) and the
/// step; `--resume` continues from DIR/latest.safetensors.
/// --trace writes the measured timeline of the last step in the Chrome /
/// Perfetto trace format mistc's --emit=timeline uses (one event per region,
/// direction and micro-batch, on the compute row of stage 0).
int runTrainer(const TrainerSpec &spec, int argc, char **argv);

/// The initial value of element `index` of parameter `name` (layer `layer`):
/// a pure function of (seed, name, layer, index), so every plan, and every
/// rank holding any part of the tensor, starts from the same model.
float initialValue(const std::string &name, int layer, int64_t index, uint64_t seed);

} // namespace mist::rt
