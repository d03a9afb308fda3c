//===- ExportProjection.cpp - The closest plan another framework can run --===//
#include "backend/exports/ExportProjection.h"

#include "ir/OpSemantics.h"
#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <tuple>

using namespace mist;

const char *mist::exportTargetName(ExportTarget t) {
  switch (t) {
  case ExportTarget::Megatron:
    return "Megatron-LM";
  case ExportTarget::DeepSpeed:
    return "DeepSpeed";
  case ExportTarget::TorchTitan:
    return "TorchTitan";
  }
  return "?";
}

namespace {

/// The value most layers use (ties: the earliest stage's), so the projection
/// keeps what matters for most of the model.
template <typename T, typename Get> T byMostLayers(const Plan &plan, Get get) {
  std::vector<std::pair<T, int>> counts;
  for (const StagePlan &s : plan.stages) {
    T v = get(s);
    auto it = std::find_if(counts.begin(), counts.end(), [&](auto &c) { return c.first == v; });
    if (it == counts.end())
      counts.push_back({v, s.layers()});
    else
      it->second += s.layers();
  }
  auto best = counts.begin();
  for (auto it = counts.begin(); it != counts.end(); ++it)
    if (it->second > best->second)
      best = it;
  return best->first;
}

std::string zeroName(const ZeroFlags &z) {
  if (z.weights)
    return "ZeRO-3";
  if (z.grads)
    return "ZeRO-2";
  return z.optimizer ? "ZeRO-1" : "no ZeRO";
}

std::string splitText(const std::vector<int> &layersPerStage) {
  std::string t;
  for (int l : layersPerStage)
    t += (t.empty() ? "" : "/") + std::to_string(l);
  return t;
}

std::vector<int> layersPerStage(const Plan &p) {
  std::vector<int> out;
  for (const StagePlan &s : p.stages)
    out.push_back(s.layers());
  return out;
}

/// Even split with the remainder on the first stages.
std::vector<int> evenSplit(int layers, int stages) {
  std::vector<int> out(stages, layers / stages);
  for (int i = 0; i < layers % stages; ++i)
    ++out[i];
  return out;
}

/// One mesh, tp, dp and micro-batch for every stage, and the G that keeps
/// the global batch.
struct UniformShape {
  int gpusPerStage, tp, dp, gradAccum, microBatch;
};

UniformShape projectShape(const Plan &plan, const char *name, std::vector<std::string> &notes) {
  const int S = static_cast<int>(plan.stages.size());
  int gpus = 0;
  for (const StagePlan &s : plan.stages)
    gpus += s.gpus();
  int gps = gpus % S == 0 ? gpus / S
                          : byMostLayers<int>(plan, [](const StagePlan &s) { return s.gpus(); });
  if (gps * S != gpus)
    notes.push_back(
        fmt::format("{} gives every stage the same GPUs: {} per stage, {} in all instead of {}",
                    name, gps, gps * S, gpus));
  int tp = byMostLayers<int>(plan, [](const StagePlan &s) { return s.tp; });
  while (gps % tp)
    tp /= 2;
  int dp = gps / tp;
  int G = plan.gradAccum;
  if (plan.globalBatch % (int64_t(G) * dp) != 0) {
    // Keep the global batch; pick the G nearest the original that splits it.
    int best = 0;
    for (int g = 1; g <= plan.globalBatch; ++g)
      if (plan.globalBatch % (int64_t(g) * dp) == 0 &&
          (!best || std::abs(g - G) < std::abs(best - G)))
        best = g;
    notes.push_back(fmt::format(
        "gradient accumulation {} instead of {} to split the batch over dp = {}", best, G, dp));
    G = best;
  }
  const int b = static_cast<int>(plan.globalBatch / (int64_t(G) * dp));
  bool meshDiffers = false, tpDiffers = false;
  for (const StagePlan &s : plan.stages) {
    meshDiffers |= s.gpus() != gps;
    tpDiffers |= s.tp != tp || s.dp != dp;
  }
  if (tpDiffers || meshDiffers)
    notes.push_back(
        fmt::format("one tp and dp for all stages: tp = {}, dp = {} (the plan: {})", tp, dp, [&] {
          std::string t;
          for (const StagePlan &s : plan.stages)
            t += (t.empty() ? "" : ", ") + fmt::format("{}x{}", s.tp, s.dp);
          return t + " as tp x dp";
        }()));
  return {gps, tp, dp, G, b};
}

/// One ZeRO level; what each target can run.
ZeroFlags projectZero(const Plan &plan, ExportTarget target, int dp,
                      std::vector<std::string> &notes) {
  const int S = static_cast<int>(plan.stages.size());
  ZeroFlags zero = byMostLayers<ZeroFlags>(plan, [](const StagePlan &s) { return s.zero; });
  if (dp == 1)
    zero = {};
  bool zeroDiffers = false;
  for (const StagePlan &s : plan.stages)
    zeroDiffers |= !(s.zero == zero) && s.dp > 1;
  if (zeroDiffers)
    notes.push_back(fmt::format("one ZeRO level for all stages: {}", zeroName(zero)));
  if (target == ExportTarget::DeepSpeed && S > 1 && (zero.grads || zero.weights)) {
    notes.push_back(fmt::format("DeepSpeed pipelines support ZeRO-1 at most: {} becomes ZeRO-1",
                                zeroName(zero)));
    zero = {false, false, true};
  }
  if (target == ExportTarget::TorchTitan && !zero.weights && dp > 1 &&
      (S > 1 || plan.stages.front().tp > 1) && !zero.optimizer) {
    notes.push_back("TorchTitan applies mixed precision through FSDP once tp or pp is used: no "
                    "ZeRO becomes ZeRO-3");
    zero = {true, true, true};
  }
  if (target == ExportTarget::TorchTitan && (zero.optimizer || zero.grads) && !zero.weights) {
    notes.push_back(fmt::format("TorchTitan shards with FSDP: {} becomes ZeRO-3 (parameters "
                                "kept gathered between forward and backward)",
                                zeroName(zero)));
    zero = {true, true, true};
  }
  return zero;
}

/// Offload: what each target can express.
OffloadRatios projectOffload(const Plan &plan, ExportTarget target, const ZeroFlags &zero,
                             std::vector<std::string> &notes) {
  OffloadRatios off = {};
  double optimizerMax = 0;
  bool fullState = true, anyOffload = false;
  for (const StagePlan &s : plan.stages) {
    optimizerMax = std::max(optimizerMax, s.offload.optimizer);
    fullState &= s.offload.weights == 1 && s.offload.grads == 1 && s.offload.optimizer == 1;
    anyOffload |= s.offload.weights > 0 || s.offload.grads > 0 || s.offload.optimizer > 0 ||
                  s.offload.activations > 0;
  }
  if (target == ExportTarget::TorchTitan) {
    if (fullState)
      off = {1, 1, 1, 0};
  } else {
    off.optimizer = optimizerMax;
    if (target == ExportTarget::DeepSpeed && zero.weights && fullState)
      off.weights = 1;
  }
  bool offloadDiffers = false;
  for (const StagePlan &s : plan.stages)
    offloadDiffers |= !(s.offload == off);
  if (anyOffload && offloadDiffers)
    notes.push_back(fmt::format(
        "offload (weights/grads/optimizer/activations) {:g}/{:g}/{:g}/{:g} on every stage: "
        "{}",
        off.weights, off.grads, off.optimizer, off.activations,
        target == ExportTarget::TorchTitan ? "FSDP offloads all state or none"
                                           : "only the optimizer state's share can be set"));
  return off;
}

/// The layers per stage the target can split the model into.
std::vector<int> projectLayerSplit(const Plan &plan, ExportTarget target,
                                   std::vector<std::string> &notes) {
  const int S = static_cast<int>(plan.stages.size());
  std::vector<int> split = layersPerStage(plan);
  int layers = 0;
  for (int l : split)
    layers += l;
  if (target == ExportTarget::Megatron && S > 2) {
    // First and last stages may differ; the middle ones must be equal.
    int middle = layers - split.front() - split.back();
    bool equal =
        std::all_of(split.begin() + 1, split.end() - 1, [&](int l) { return l == split[1]; });
    if (!equal) {
      if (middle % (S - 2) == 0)
        std::fill(split.begin() + 1, split.end() - 1, middle / (S - 2));
      else
        split = evenSplit(layers, S);
    }
  } else if (target == ExportTarget::DeepSpeed) {
    split = evenSplit(layers, S); // PipelineModule(partition_method="uniform")
  }
  if (splitText(split) != splitText(layersPerStage(plan)))
    notes.push_back(fmt::format("layers per stage {} instead of {}", splitText(split),
                                splitText(layersPerStage(plan))));
  return split;
}

/// Recomputation: the checkpointed layers of each stage of `split`, one
/// setting for all stages.
std::vector<int> projectCheckpointing(const Plan &plan, ExportTarget target,
                                      const std::vector<int> &split,
                                      std::vector<std::string> &notes) {
  const int S = static_cast<int>(plan.stages.size());
  int ckptMax = 0;
  for (const StagePlan &s : plan.stages)
    ckptMax = std::max(ckptMax, s.ckptLayers);
  std::vector<int> ckpt(S);
  if (target == ExportTarget::TorchTitan) {
    // TorchTitan 0.3 recomputes every block (FullAC) or none (its
    // SelectiveAC picks ops, not layers): any checkpointing becomes all, which
    // needs no more memory than the plan's.
    for (int i = 0; i < S; ++i)
      ckpt[i] = ckptMax == 0 ? 0 : split[i];
  } else {
    for (int i = 0; i < S; ++i)
      ckpt[i] = std::min(ckptMax, split[i]);
  }
  std::string ckptText;
  bool ckptChanged = false;
  for (int i = 0; i < S; ++i) {
    ckptText += (i ? "/" : "") + std::to_string(ckpt[i]);
    ckptChanged |= ckpt[i] != plan.stages[i].ckptLayers;
  }
  if (ckptChanged)
    notes.push_back(fmt::format("checkpointed layers per stage {} ({})", ckptText,
                                target == ExportTarget::TorchTitan
                                    ? "TorchTitan 0.3 recomputes every layer or none"
                                    : "one setting for all stages"));
  return ckpt;
}

/// What DeepSpeed and Megatron-LM require of ZeRO and offload together, and
/// DeepSpeed of ZeRO and the precision mix (each found by the framework's own
/// validators: bench/exports/check-exports.py).
void projectFrameworkRules(ExportTarget target, const TrainConfig &train, int dp, ZeroFlags &zero,
                           OffloadRatios &off, std::vector<std::string> &notes) {
  const char *name = exportTargetName(target);
  if (target == ExportTarget::DeepSpeed && off.optimizer > 0 && off.optimizer < 1 &&
      !zero.weights) {
    notes.push_back(fmt::format("DeepSpeed offloads part of the optimizer state only under "
                                "ZeRO-3: all of it offloaded instead of {:g}",
                                off.optimizer));
    off.optimizer = 1;
  }
  auto needZero1 = [&](const std::string &why) {
    if (zero.optimizer)
      return;
    zero.optimizer = true;
    notes.push_back(fmt::format("{} {}: no ZeRO becomes ZeRO-1{}", name, why,
                                dp > 1 ? "" : " (with one data-parallel rank it shards nothing)"));
  };
  if (off.optimizer > 0 && target == ExportTarget::DeepSpeed)
    needZero1("offloads optimizer state only under ZeRO");
  if (off.optimizer > 0 && target == ExportTarget::Megatron)
    needZero1("offloads optimizer state only with its distributed optimizer");
  if (target == ExportTarget::DeepSpeed && train.dtype != DType::F32 &&
      train.gradientDtype() != train.dtype)
    needZero1(fmt::format("accumulates {} gradients of {} training only in its ZeRO optimizers",
                          torchDtypeShortName(train.gradientDtype()),
                          torchDtypeShortName(train.dtype)));
}

} // namespace

ExportProjection mist::projectForExport(const Plan &plan, const TrainConfig &train,
                                        ExportTarget target, int gpusPerNode) {
  ExportProjection out;
  out.plan = plan;
  out.gpusPerNode = gpusPerNode;
  std::vector<std::string> &notes = out.notes;
  const UniformShape shape = projectShape(plan, exportTargetName(target), notes);
  ZeroFlags zero = projectZero(plan, target, shape.dp, notes);
  OffloadRatios off = projectOffload(plan, target, zero, notes);
  projectFrameworkRules(target, train, shape.dp, zero, off, notes);
  const std::vector<int> split = projectLayerSplit(plan, target, notes);
  const std::vector<int> ckpt = projectCheckpointing(plan, target, split, notes);

  Plan &p = out.plan;
  p.gradAccum = shape.gradAccum;
  // Interleaved 1F1B: Megatron-LM (--num-layers-per-virtual-pipeline-stage)
  // and TorchTitan (Interleaved1F1B) run it; DeepSpeed's engine does not.
  if (plan.virtualStages > 1 && target == ExportTarget::DeepSpeed) {
    p.virtualStages = 1;
    notes.push_back(fmt::format("plain 1F1B instead of interleaved 1F1B with {} virtual stages",
                                plan.virtualStages));
  }
  // Sequence parallelism: Megatron-LM (--sequence-parallel) and TorchTitan
  // (enable_sequence_parallel) run it; tp-communication overlap only
  // Megatron-LM (--tp-comm-overlap). DeepSpeed's engine runs neither.
  if (plan.sequenceParallel && target == ExportTarget::DeepSpeed) {
    p.sequenceParallel = false;
    notes.push_back("tp without sequence parallelism (all-reduces after the row-parallel ops)");
  }
  // Gradient reductions after the backward: Megatron-LM without
  // --overlap-grad-reduce, DeepSpeed with overlap_comm false; TorchTitan's
  // FSDP always overlaps them.
  if (!plan.overlapGradReduce && target == ExportTarget::TorchTitan) {
    p.overlapGradReduce = true;
    notes.push_back("gradient reductions overlapped with the last backward (FSDP always does)");
  }
  // Selective recomputation as mistc runs it (the norms' and activation
  // functions' outputs computed again) is none of the frameworks': Megatron-
  // LM's selective granularity recomputes the attention core and
  // --recompute-modules layernorm only the norms; TorchTitan's op-level
  // selective AC saves every other matmul instead; DeepSpeed recomputes
  // whole layers. The export runs without it, priced so.
  if (plan.selectiveRecompute) {
    p.selectiveRecompute = false;
    notes.push_back("no selective recomputation (the norms' and activation functions' outputs "
                    "stay saved: the framework has no recomputation of just those)");
  }
  if (plan.tpCommOverlap && target != ExportTarget::Megatron) {
    p.tpCommOverlap = false;
    notes.push_back("tp collectives between the GEMMs instead of overlapped with them");
  }
  const int gps = shape.gpusPerStage;
  int first = 0;
  for (size_t i = 0; i < p.stages.size(); ++i) {
    StagePlan &s = p.stages[i];
    s.firstLayer = first;
    s.lastLayer = first + split[i] - 1;
    first += split[i];
    s.meshNodes = gps >= gpusPerNode ? gps / gpusPerNode : 1;
    s.meshGpusPerNode = gps >= gpusPerNode ? gpusPerNode : gps;
    s.tp = shape.tp;
    s.dp = shape.dp;
    s.microBatch = shape.microBatch;
    s.zero = zero;
    s.offload = off;
    s.ckptLayers = ckpt[i];
  }
  p.predicted.reset();
  return out;
}

void mist::writeProjectionComment(const ExportProjection &projected, ExportTarget target,
                                  const char *exactLine, llvm::raw_ostream &os) {
  if (projected.exact()) {
    os << "# " << exactLine << "\n";
  } else {
    os << "# " << exportTargetName(target)
       << " cannot express every per-stage choice of the plan; this is the\n"
          "# closest plan it can run:\n";
    for (const std::string &n : projected.notes)
      os << "#   - " << n << "\n";
  }
  for (const std::string &r : projected.remarks)
    os << "# " << r << "\n";
}

ExportModel mist::exportModelOf(const Module &m) {
  ExportModel e;
  e.name = m.name;
  auto value = [&](const char *name) -> int64_t {
    const Symbol *s = m.symbols.lookup(name);
    return s && s->value ? *s->value : 0;
  };
  e.hidden = value("hidden");
  e.heads = value("heads");
  e.kvHeads = value("kv_heads");
  e.ffn = value("ffn");
  e.vocab = value("vocab");
  if (const Symbol *s = m.symbols.ofKind(SymbolKind::Seq); s && s->value)
    e.seqLen = *s->value;
  if (auto l = exprToInt(m.symbols.bindAll(m.layer.repeat)))
    e.layers = *l;
  bool sawNorm = false;
  std::vector<const Op *> layerNorms;
  for (const Region *r : m.regions)
    for (const auto &op : r->fwd.ops) {
      e.rmsnorm |= op->kind == OpKind::RMSNorm;
      e.rope |= op->kind == OpKind::Rope;
      e.swiglu |= op->kind == OpKind::Silu;
      e.learnedPositions |= op->kind == OpKind::PositionEmbedding;
      e.linearBias |= op->kind == OpKind::Linear && op->boolAttr("bias", true);
      e.geluTanh |= op->kind == OpKind::Gelu && !geluIsExact(*op);
      e.geluExact |= op->kind == OpKind::Gelu && geluIsExact(*op);
      e.tiedHead |= op->kind == OpKind::LMHead && op->boolAttr("tied", false);
      if (op->kind == OpKind::CrossEntropy)
        e.fusedLoss = op->boolAttr("fused", true);
      if (op->kind == OpKind::Dropout)
        e.dropout = std::max(e.dropout, op->realAttr("p").value_or(0));
      if (op->kind == OpKind::Attention)
        e.attentionDropout = std::max(e.attentionDropout, op->realAttr("dropout").value_or(0));
      if (op->kind == OpKind::Rope)
        e.ropeTheta = op->realAttr("theta").value_or(e.ropeTheta);
      if ((op->kind == OpKind::LayerNorm || op->kind == OpKind::RMSNorm) && r == &m.layer &&
          !sawNorm) {
        e.normEps = op->realAttr("eps").value_or(e.normEps);
        sawNorm = true;
      }
      if ((op->kind == OpKind::LayerNorm || op->kind == OpKind::RMSNorm) && r == &m.layer)
        layerNorms.push_back(op.get());
      if (op->kind == OpKind::Rope && r == &m.layer) {
        auto size = [&](const char *attr) -> std::optional<int64_t> {
          auto d = op->dimAttr(attr);
          return d ? exprToInt(m.symbols.bindAll(*d)) : std::nullopt;
        };
        if (auto headDim = size("head_dim"), rotary = size("rotary_dim");
            headDim && rotary && *headDim > 0)
          e.rotaryFraction = double(*rotary) / double(*headDim);
      }
    }
  // Two norms reading one value: attention and the MLP side by side.
  e.parallelResidual = layerNorms.size() == 2 && !layerNorms[0]->operands.empty() &&
                       !layerNorms[1]->operands.empty() &&
                       layerNorms[0]->operands[0] == layerNorms[1]->operands[0];
  e.train = m.train;
  return e;
}

const char *mist::torchDtypeName(DType t) {
  return t == DType::BF16 ? "bfloat16" : t == DType::F16 ? "float16" : "float32";
}

const char *mist::torchDtypeShortName(DType t) {
  return t == DType::BF16 ? "bf16" : t == DType::F16 ? "fp16" : "fp32";
}

std::string mist::weightDecayRemark(const TrainConfig &train, ExportTarget target) {
  if (train.weightDecay == 0)
    return "";
  std::string kept = train.noDecayText();
  for (size_t at = kept.find(','); at != std::string::npos; at = kept.find(',', at + 2))
    kept.replace(at, 1, ", ");
  // TorchTitan 0.3 writes the model's groups as regex parameter groups.
  if (target == ExportTarget::TorchTitan)
    return "";
  if (target == ExportTarget::DeepSpeed)
    return kept.empty() ? ""
                        : fmt::format("weight decay: the client's parameter groups decide; give "
                                      "weight_decay 0 to the {} parameters (no_decay)",
                                      kept);
  // What the target decays of biases, norms and embedding tables.
  const std::string name = "Megatron-LM";
  std::vector<std::string> extra, missing;
  for (auto [theirs, ours, what] : {std::tuple{false, train.decayBiases, "biases"},
                                    std::tuple{false, train.decayNorms, "norms"},
                                    std::tuple{true, train.decayEmbeddings, "embedding tables"}})
    if (theirs != ours)
      (theirs ? extra : missing).push_back(what);
  std::vector<std::string> parts;
  if (!extra.empty())
    parts.push_back(fmt::format("{} decays the {}, which the model's no_decay = ({}) leaves out",
                                name, fmt::join(extra, " and "), kept));
  if (!missing.empty())
    parts.push_back(fmt::format("{} does not decay the {}, which the model decays", name,
                                fmt::join(missing, " and ")));
  return parts.empty() ? "" : "weight decay: " + fmt::format("{}", fmt::join(parts, "; "));
}
