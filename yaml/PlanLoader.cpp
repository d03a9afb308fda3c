//===- PlanLoader.cpp - Read a training plan ------------------------------===//
#include "yaml/PlanLoader.h"

#include "format/Limits.h"
#include "yaml/YamlReader.h"
#include <cstdint>

using namespace mist;

namespace {

class PlanParser {
public:
  PlanParser(unsigned bufferId, DiagnosticEngine &diag, PlanLocations *locations)
      : r(bufferId, diag), diag(diag), locations(locations) {}

  std::optional<Plan> parse() {
    unsigned before = diag.errorCount();
    auto top = r.parseTopMapping("plan");
    if (!top)
      return std::nullopt;
    static const llvm::StringRef keys[] = {"mist_plan",
                                           "model",
                                           "seq_len",
                                           "dtype",
                                           "cluster",
                                           "global_batch",
                                           "grad_accum",
                                           "stages",
                                           "predicted",
                                           "virtual_stages",
                                           "sequence_parallel",
                                           "tp_comm_overlap",
                                           "selective_recompute",
                                           "overlap_grad_reduce"};
    YamlMap m(r, *top, "plan", keys);
    if (locations) {
      locations->top["plan"] = r.bufferStart();
      for (llvm::StringRef k : keys)
        if (m.has(k))
          locations->top[k.str()] = m.valueLoc(k);
    }
    if (m.getInt("mist_plan", p.version, Need::Required) && p.version != planFormatVersion) {
      r.error(m.valueLoc("mist_plan"), "unsupported plan version " + std::to_string(p.version) +
                                           " (this mistc reads " +
                                           std::to_string(planFormatVersion) + ")");
    }
    m.getString("model", p.model, Need::Optional);
    m.getInt("seq_len", p.seqLen, Need::Optional, Range::Count);
    if (m.getString("dtype", p.dtype, Need::Optional) && !p.dtype.empty() && p.dtype != "bf16" &&
        p.dtype != "f16" && p.dtype != "f32")
      r.error(m.valueLoc("dtype"), "dtype must be bf16, f16 or f32, not '" + p.dtype + "'");
    m.getString("cluster", p.cluster, Need::Optional);
    batchOk = m.getInt("global_batch", p.globalBatch, Need::Required, Range::Count);
    batchOk &= m.getInt("grad_accum", p.gradAccum, Need::Required, Range::Count);
    m.getInt("virtual_stages", p.virtualStages, Need::Optional, Range::Count);
    m.getBool("sequence_parallel", p.sequenceParallel, Need::Optional);
    m.getBool("tp_comm_overlap", p.tpCommOverlap, Need::Optional);
    m.getBool("selective_recompute", p.selectiveRecompute, Need::Optional);
    m.getBool("overlap_grad_reduce", p.overlapGradReduce, Need::Optional);
    if (auto stages = m.get("stages", Need::Required))
      parseStages(*stages, m.valueLoc("stages"));
    if (auto pred = m.get("predicted", Need::Optional))
      parsePrediction(*pred, m.valueLoc("predicted"));
    if (diag.errorCount() != before)
      return std::nullopt;
    return p;
  }

private:
  void parseStages(const YAML::Node &n, llvm::SMLoc at) {
    if (!n.IsSequence()) {
      r.error(at, "expected a sequence of stages for 'stages'");
      return;
    }
    if (n.size() == 0) {
      r.error(at, "a plan needs at least one stage");
      return;
    }
    if (n.size() > size_t(limits::maxStages)) {
      r.error(at, "a plan of " + std::to_string(n.size()) + " stages: mistc reads at most " +
                      std::to_string(limits::maxStages));
      return;
    }
    // The end of the previous stage's range, when it was read correctly.
    std::optional<int> prevLast;
    int index = 0;
    for (const YAML::Node &s : n) {
      std::optional<StagePlan> stage = parseStage(s, at, index, prevLast);
      p.stages.push_back(stage.value_or(StagePlan()));
      ++index;
    }
  }

  /// Reads stage `index`; `prevLast` is the last layer of the stage before
  /// (when known) and becomes this stage's.
  std::optional<StagePlan> parseStage(const YAML::Node &n, llvm::SMLoc at, int index,
                                      std::optional<int> &prevLast) {
    unsigned before = diag.errorCount();
    std::optional<int> beforeLast = prevLast;
    prevLast.reset();
    std::string name = "stage " + std::to_string(index);
    static const llvm::StringRef keys[] = {"layers", "mesh", "micro_batch", "dp",
                                           "tp",     "zero", "ckpt_layers", "offload"};
    YamlMap m(r, n, name, keys, at);
    if (locations) {
      auto &here = locations->stages.emplace_back();
      here["stage"] = r.loc(n, at);
      if (m.valid())
        for (llvm::StringRef k : keys)
          if (m.has(k))
            here[k.str()] = m.valueLoc(k);
    }
    if (!m.valid())
      return std::nullopt;
    StagePlan s;
    bool rangeOk = parseLayerRange(m, name, index, beforeLast, s);
    if (rangeOk)
      prevLast = s.lastLayer;
    bool meshOk = parseMesh(m, s);
    bool mbOk = m.getInt("micro_batch", s.microBatch, Need::Required, Range::Count);
    bool dpOk = m.getInt("dp", s.dp, Need::Required, Range::Count);
    bool tpOk = m.getInt("tp", s.tp, Need::Required, Range::Count);
    parseMemoryKnobs(m, rangeOk, s);
    if (meshOk && dpOk && tpOk)
      checkMeshMatchesDpTp(m, s);
    if (batchOk && mbOk && dpOk)
      checkBatchSplit(m, s);
    if (diag.errorCount() != before)
      return std::nullopt;
    return s;
  }

  /// `layers: [first, last]`: a non-empty range that starts at 0 for the
  /// first stage and right after `beforeLast` (when known) for the others.
  /// True when the range itself was read correctly.
  bool parseLayerRange(YamlMap &m, const std::string &name, int index,
                       std::optional<int> beforeLast, StagePlan &s) {
    auto layers = m.get("layers", Need::Required);
    if (!layers)
      return false;
    llvm::SMLoc lAt = m.valueLoc("layers");
    const YAML::Node &range = *layers; // const: operator[] must not insert
    if (!range.IsSequence() || range.size() != 2) {
      r.error(lAt, "'layers' must be [first, last] (inclusive)");
      return false;
    }
    bool rangeOk =
        r.toInt(range[0], r.loc(range[0], lAt), "the first layer", s.firstLayer, Range::LayerIndex);
    rangeOk &=
        r.toInt(range[1], r.loc(range[1], lAt), "the last layer", s.lastLayer, Range::LayerIndex);
    if (rangeOk && s.lastLayer < s.firstLayer) {
      r.error(lAt, "layer range [" + std::to_string(s.firstLayer) + ", " +
                       std::to_string(s.lastLayer) + "] is empty");
      rangeOk = false;
    }
    if (rangeOk && index == 0 && s.firstLayer != 0) {
      r.error(lAt, "the first stage must start at layer 0, not " + std::to_string(s.firstLayer));
    } else if (rangeOk && beforeLast && s.firstLayer != *beforeLast + 1) {
      r.error(lAt, name + " starts at layer " + std::to_string(s.firstLayer) + " but stage " +
                       std::to_string(index - 1) + " ends at layer " + std::to_string(*beforeLast) +
                       " (expected " + std::to_string(*beforeLast + 1) + ")");
    }
    return rangeOk;
  }

  /// `mesh: {nodes, gpus_per_node}`, at most limits::maxCount GPUs.
  bool parseMesh(YamlMap &m, StagePlan &s) {
    auto mesh = m.get("mesh", Need::Required);
    if (!mesh)
      return false;
    YamlMap mm(r, *mesh, "mesh", {"nodes", "gpus_per_node"}, m.valueLoc("mesh"));
    bool meshOk = mm.getInt("nodes", s.meshNodes, Need::Required, Range::Count);
    meshOk &= mm.getInt("gpus_per_node", s.meshGpusPerNode, Need::Required, Range::Count);
    if (meshOk && int64_t(s.meshNodes) * s.meshGpusPerNode > limits::maxCount) {
      r.error(m.valueLoc("mesh"), "the mesh's " + std::to_string(s.meshNodes) + " x " +
                                      std::to_string(s.meshGpusPerNode) +
                                      " GPUs are more than the 16,777,216 mistc accepts");
      meshOk = false;
    }
    return meshOk;
  }

  /// The optional memory knobs: `zero`, `ckpt_layers` (at most the stage's
  /// layers, when its range is known) and `offload` ratios.
  void parseMemoryKnobs(YamlMap &m, bool rangeOk, StagePlan &s) {
    if (auto zero = m.get("zero", Need::Optional)) {
      YamlMap z(r, *zero, "zero", {"weights", "grads", "optimizer"}, m.valueLoc("zero"));
      z.getBool("weights", s.zero.weights, Need::Optional);
      z.getBool("grads", s.zero.grads, Need::Optional);
      z.getBool("optimizer", s.zero.optimizer, Need::Optional);
      const bool weightsAlone = s.zero.weights && !s.zero.grads;
      if (!s.zero.nested())
        r.error(m.valueLoc("zero"),
                std::string("'zero' shards the ") + (weightsAlone ? "weights" : "gradients") +
                    " over dp but not the " + (weightsAlone ? "gradients" : "optimizer state") +
                    ": ZeRO's levels nest (1: optimizer; 2: gradients and optimizer; 3: "
                    "weights, gradients and optimizer), e.g. {weights: true, grads: true, "
                    "optimizer: true} for ZeRO-3");
    }
    if (m.getInt("ckpt_layers", s.ckptLayers, Need::Optional, Range::NonNegative) && rangeOk &&
        s.ckptLayers > s.layers())
      r.error(m.valueLoc("ckpt_layers"), "'ckpt_layers' (" + std::to_string(s.ckptLayers) +
                                             ") exceeds the stage's " + std::to_string(s.layers()) +
                                             " layers");
    if (auto off = m.get("offload", Need::Optional)) {
      YamlMap o(r, *off, "offload", {"weights", "grads", "optimizer", "activations"},
                m.valueLoc("offload"));
      o.getReal("weights", s.offload.weights, Need::Optional, Range::Ratio);
      o.getReal("grads", s.offload.grads, Need::Optional, Range::Ratio);
      o.getReal("optimizer", s.offload.optimizer, Need::Optional, Range::Ratio);
      o.getReal("activations", s.offload.activations, Need::Optional, Range::Ratio);
    }
  }

  // Products in 64 bits: two factors of at most 2^24 fit; three are checked.

  /// dp x tp must be the mesh's GPU count.
  void checkMeshMatchesDpTp(YamlMap &m, const StagePlan &s) {
    int64_t gpus = int64_t(s.meshNodes) * s.meshGpusPerNode;
    int64_t dptp = int64_t(s.dp) * s.tp;
    if (gpus != dptp)
      r.error(m.valueLoc("dp"), "dp (" + std::to_string(s.dp) + ") x tp (" + std::to_string(s.tp) +
                                    ") = " + std::to_string(dptp) + " does not match the mesh's " +
                                    std::to_string(gpus) + " GPUs (" + std::to_string(s.meshNodes) +
                                    " x " + std::to_string(s.meshGpusPerNode) + ")");
  }

  /// micro_batch x dp x grad_accum must be global_batch.
  void checkBatchSplit(YamlMap &m, const StagePlan &s) {
    int64_t batch = 0;
    const bool overflow =
        __builtin_mul_overflow(int64_t(s.microBatch) * s.dp, int64_t(p.gradAccum), &batch);
    if (overflow || batch != p.globalBatch)
      r.error(m.valueLoc("micro_batch"),
              "micro_batch (" + std::to_string(s.microBatch) + ") x dp (" + std::to_string(s.dp) +
                  ") x grad_accum (" + std::to_string(p.gradAccum) +
                  ") = " + (overflow ? "more than 2^63" : std::to_string(batch)) +
                  " does not match global_batch " + std::to_string(p.globalBatch));
  }

  void parsePrediction(const YAML::Node &n, llvm::SMLoc at) {
    YamlMap m(r, n, "predicted", {"iteration_s", "tokens_per_s", "peak_gib"}, at);
    if (!m.valid())
      return;
    PlanPrediction pred;
    m.getReal("iteration_s", pred.iterationSeconds, Need::Required, Range::NonNegative);
    m.getReal("tokens_per_s", pred.tokensPerSecond, Need::Required, Range::NonNegative);
    if (auto peaks = m.get("peak_gib", Need::Optional)) {
      llvm::SMLoc pAt = m.valueLoc("peak_gib");
      if (!peaks->IsSequence()) {
        r.error(pAt, "expected a sequence of numbers (GiB per stage) for 'peak_gib'");
      } else {
        for (const YAML::Node &x : *peaks) {
          double v = 0;
          if (r.toReal(x, r.loc(x, pAt), "a peak memory", v, Range::NonNegative))
            pred.peakGiB.push_back(v);
        }
        if (peaks->size() != 0 && !p.stages.empty() && peaks->size() != p.stages.size())
          r.error(pAt, "'peak_gib' has " + std::to_string(peaks->size()) + " entries for " +
                           std::to_string(p.stages.size()) + " stages");
      }
    }
    p.predicted = std::move(pred);
  }

  YamlReader r;
  DiagnosticEngine &diag;
  PlanLocations *locations;
  Plan p;
  bool batchOk = false;
};

} // namespace

llvm::SMLoc PlanLocations::of(int stage, const std::string &key) const {
  if (stage >= 0 && size_t(stage) < stages.size()) {
    const auto &here = stages[size_t(stage)];
    for (const std::string &k : {key, std::string("stage")})
      if (auto it = here.find(k); it != here.end())
        return it->second;
  }
  for (const std::string &k : {key, std::string("stages"), std::string("plan")})
    if (auto it = top.find(k); it != top.end())
      return it->second;
  return {};
}

std::optional<Plan> mist::loadPlan(unsigned bufferId, DiagnosticEngine &diag,
                                   PlanLocations *locations) {
  PlanParser parser(bufferId, diag, locations);
  try {
    return parser.parse();
  } catch (const YAML::Exception &e) {
    // Parsing proper is caught in YamlReader; this is a safety net for the
    // node accessors, which yaml-cpp documents as throwing too.
    diag.error(YamlReader(bufferId, diag).loc(e.mark), "invalid YAML: " + e.msg);
    return std::nullopt;
  }
}
