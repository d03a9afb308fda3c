//===- ExportProjection.h - The closest plan another framework can run ----===//
/// \file
/// Megatron-LM, DeepSpeed and TorchTitan run uniform plans: one tp, dp,
/// micro-batch, ZeRO level and recomputation setting for every pipeline
/// stage, and only some offload and layer-split shapes. A mistc plan may
/// differ per stage; `projectForExport` turns it into the closest plan the
/// target can express and says, knob by knob, what it had to change. The
/// driver prices both plans with the same model so the user sees what the
/// projection costs.
//===----------------------------------------------------------------------===//
#pragma once

#include "format/Plan.h"
#include "ir/IR.h"
#include "llvm/Support/raw_ostream.h"
#include <string>
#include <vector>

namespace mist {

enum class ExportTarget { Megatron, DeepSpeed, TorchTitan };
const char *exportTargetName(ExportTarget t);

struct ExportProjection {
  Plan plan;                      ///< what the target will run
  std::vector<std::string> notes; ///< every change from the original, one line each
  int gpusPerNode = 1;            ///< of the cluster, for launch lines
  /// What the driver adds once it priced both plans (the projection's
  /// predicted cost, whether it fits, what the target sets up in code):
  /// written into the file's header, so the file says what stderr said.
  std::vector<std::string> remarks;
  bool exact() const { return notes.empty(); }
};

/// `train` decides what precision mixes a target can run (DeepSpeed keeps
/// fp32 gradients of bf16 training only in its ZeRO optimizers).
ExportProjection projectForExport(const Plan &plan, const TrainConfig &train, ExportTarget target,
                                  int gpusPerNode);

/// The comment lines a text export starts with: `exactLine` when the
/// projection changed nothing, else what it changed; then the remarks.
void writeProjectionComment(const ExportProjection &projected, ExportTarget target,
                            const char *exactLine, llvm::raw_ostream &os);

/// How the target's weight decay differs from the train section's no_decay
/// (Megatron-LM decays every parameter of two or more dimensions, so the
/// embeddings but not biases and norms; TorchTitan 0.3 takes the model's
/// groups (regex parameter groups);
/// DeepSpeed leaves the groups to the client's code): one line, or empty
/// when the target does what the model says.
std::string weightDecayRemark(const TrainConfig &train, ExportTarget target);

/// What the exporters need to know of the model and its training setup.
struct ExportModel {
  std::string name;
  int64_t layers = 0, hidden = 0, heads = 0, kvHeads = 0, ffn = 0, vocab = 0, seqLen = 0;
  bool rmsnorm = false, rope = false, swiglu = false, learnedPositions = false;
  bool linearBias = false;     ///< any linear layer has a bias
  bool geluTanh = false;       ///< a gelu is the tanh approximation (`approximate`, the default)
  bool geluExact = false;      ///< a gelu is the exact x Phi(x) (`approximate = false`)
  bool tiedHead = false;       ///< the LM head reuses the token embedding
  bool fusedLoss = true;       ///< cross_entropy is the fused kernel (not `fused = false`)
  double dropout = 0;          ///< the largest dropout probability of the layers
  double attentionDropout = 0; ///< on the attention probabilities
  double ropeTheta = 10000;    ///< the rotary base
  double rotaryFraction = 1;   ///< rotary_dim / head_dim of the rope on q (GPT-NeoX: 0.25)
  /// The MLP's norm reads the layer's input beside attention's (GPT-NeoX,
  /// Falcon's parallel attention and MLP), not the sum after attention.
  bool parallelResidual = false;
  double normEps = 1e-5; ///< the layers' first norm's epsilon
  TrainConfig train;
};
ExportModel exportModelOf(const Module &m);

/// A floating-point dtype as PyTorch names it ("bfloat16", "float16",
/// "float32") and as DeepSpeed's configs do ("bf16", "fp16", "fp32").
const char *torchDtypeName(DType t);
const char *torchDtypeShortName(DType t);

/// The exporters, one per target: `projected` must come from projectForExport.
void writeMegatronArgs(const ExportProjection &projected, const ExportModel &model,
                       llvm::raw_ostream &os);
void writeDeepSpeedConfig(const ExportProjection &projected, const ExportModel &model,
                          llvm::raw_ostream &os);
void writeTorchTitanConfig(const ExportProjection &projected, const ExportModel &model,
                           llvm::raw_ostream &os);

} // namespace mist
