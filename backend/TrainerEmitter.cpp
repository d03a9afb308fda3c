//===- TrainerEmitter.cpp - Writes train.cu for a plan --------------------===//
#include "backend/TrainerEmitter.h"

#include "backend/ScratchPlanner.h"

#include "schedule/Schedule.h"
#include <algorithm>
#include <cctype>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <optional>
#include <set>

using namespace mist;

namespace {

/// Each buffer's IR name as a C++ identifier ("layer.ln1.weight" ->
/// layer_ln1_weight), unique within the stage: what train.cu calls it.
std::vector<std::string> bufferIdentifiers(const LoweredStage &st) {
  std::vector<std::string> out;
  std::set<std::string> taken;
  for (const LoweredBuffer &b : st.buffers) {
    std::string id;
    for (char c : b.name)
      id += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    if (id.empty() || std::isdigit(static_cast<unsigned char>(id[0])))
      id = "b_" + id;
    std::string unique = id;
    for (int k = 2; taken.count(unique); ++k)
      unique = fmt::format("{}_{}", id, k);
    taken.insert(unique);
    out.push_back(unique);
  }
  return out;
}

class Emitter {
public:
  Emitter(const Module &m, const LoweredStage &st, llvm::raw_ostream &os)
      : m(m), st(st), os(os), idents(bufferIdentifiers(st)) {
    const LoweredRegion &layer = st.region(RegionKind::Layer);
    for (const auto *ops : {&layer.forward, &layer.backward})
      for (const LoweredOp &op : *ops) {
        layerOwned.insert(op.operands.begin(), op.operands.end());
        layerOwned.insert(op.results.begin(), op.results.end());
      }
    layerOwned.insert(layer.inputs.begin(), layer.inputs.end());
    layerOwned.insert(layer.gradInputs.begin(), layer.gradInputs.end());
  }

  /// `G.at(buf::x)` or `L.at(buf::ln1)`: a buffer of the global frame or
  /// of this layer's, by its name in the stage's `buf` enumeration.
  std::string ref(int i) const {
    bool ids = st.buffers[i].dtype == DType::I32;
    return fmt::format("{}.{}({})", frameOf(i), ids ? "ids" : "at", named(i));
  }
  const char *frameOf(int i) const { return layerOwned.count(i) ? "L" : "G"; }
  std::string named(int i) const { return "buf::" + idents.at(size_t(i)); }
  int64_t n(int i) const { return st.buffers[i].elements(); }
  const std::vector<int64_t> &shape(int i) const { return st.buffers[i].shape; }

  std::string irLine(const LoweredOp &op) const {
    auto names = [&](const std::vector<int> &ids) {
      std::string s;
      for (int i : ids)
        s += (s.empty() ? "%" : ", %") + st.buffers[i].name;
      return s;
    };
    return fmt::format("{} = {} {}", names(op.results), opName(op.kind), names(op.operands));
  }

  /// One op as a call to runtime/ops; false for an op the CPU ops lack.
  bool call(const LoweredOp &op, std::string &out) const {
    auto in = [&](size_t k) { return ref(op.operands.at(k)); };
    auto res = [&](size_t k) { return ref(op.results.at(k)); };
    auto flag = [&](const char *k) {
      auto it = op.words.find(k);
      return it != op.words.end() && it->second == "true";
    };
    auto num = [&](const char *k, double dflt) {
      auto it = op.numbers.find(k);
      return it == op.numbers.end() ? dflt : it->second;
    };
    const int o0 = op.operands.empty() ? -1 : op.operands[0],
              r0 = op.results.empty() ? -1 : op.results[0];
    switch (op.kind) {
    case OpKind::Embedding: {
      auto t = shape(op.operands[1]);
      out = fmt::format("embedding({}, {}, {}, {}, {}, {}, C.rank() * {});", res(0), in(0), in(1),
                        n(o0), t[1], t[0], t[0]);
      return true;
    }
    case OpKind::EmbeddingGrad: {
      auto t = shape(r0);
      out = fmt::format("embeddingGrad({}, {}, {}, {}, {}, {}, C.rank() * {});", res(0), in(0),
                        in(1), n(op.operands[1]), t[1], t[0], t[0]);
      return true;
    }
    case OpKind::PositionEmbedding: {
      auto s = shape(r0);
      out = fmt::format("positionEmbedding({}, {}, {}, {}, {});", res(0), in(0), s[0], s[1], s[2]);
      return true;
    }
    case OpKind::PositionEmbeddingGrad: {
      auto s = shape(o0);
      out = fmt::format("positionEmbeddingGrad({}, {}, {}, {}, {});", res(0), in(0), s[0], s[1],
                        s[2]);
      return true;
    }
    case OpKind::Add:
    case OpKind::GradAdd:
      out = fmt::format("add({}, {}, {}, {});", res(0), in(0), in(1), n(r0));
      return true;
    case OpKind::AllReduce: // the partial sums of the tp group
      out = fmt::format("C.allReduce({}, {}, {});", res(0), in(0), n(r0));
      return true;
    case OpKind::TpCopy:  // the identity forward (its gradient has its own all_reduce)
    case OpKind::Dropout: // p = 0 (checked before emitting)
    case OpKind::DropoutGrad:
      out = fmt::format("copy({}, {}, {});", res(0), in(0), n(r0));
      return true;
    case OpKind::LayerNorm: {
      int64_t c = shape(o0).back();
      out = fmt::format("layerNorm({}, {}, {}, {}, {}, {}, {}, float({}));", res(0), res(1), in(0),
                        in(1), flag("bias") ? in(2) : "nullptr", n(o0) / c, c, num("eps", 1e-5));
      return true;
    }
    case OpKind::LayerNormGrad: {
      int64_t c = shape(o0).back();
      bool b = flag("bias");
      out = fmt::format("layerNormGrad({}, {}, {}, {}, {}, {}, {}, {}, {});", res(0), res(1),
                        b ? res(2) : "nullptr", in(0), in(1), in(2), in(b ? 4 : 3), n(o0) / c, c);
      return true;
    }
    case OpKind::RMSNorm: {
      int64_t c = shape(o0).back();
      out = fmt::format("rmsNorm({}, {}, {}, {}, {}, {}, float({}));", res(0), res(1), in(0), in(1),
                        n(o0) / c, c, num("eps", 1e-5));
      return true;
    }
    case OpKind::RMSNormGrad: {
      int64_t c = shape(o0).back();
      out = fmt::format("rmsNormGrad({}, {}, {}, {}, {}, {}, {}, {});", res(0), res(1), in(0),
                        in(1), in(2), in(3), n(o0) / c, c);
      return true;
    }
    case OpKind::Linear: {
      auto w = shape(op.operands[1]);
      // A row-parallel linear makes partial sums: one tp rank adds the bias.
      auto shard = op.words.find("shard");
      bool row = shard != op.words.end() && shard->second == "row";
      std::string bias = !flag("bias") ? "nullptr"
                         : row         ? fmt::format("C.rank() == 0 ? {} : nullptr", in(2))
                                       : in(2);
      out = fmt::format("linear({}, {}, {}, {}, {}, {}, {});", res(0), in(0), in(1), bias,
                        n(o0) / w[0], w[0], w[1]);
      return true;
    }
    case OpKind::LinearGrad: {
      auto w = shape(op.operands[2]);
      out = fmt::format("linearGrad({}, {}, {}, {}, {}, {}, {}, {}, {});", res(0), res(1),
                        flag("bias") ? res(2) : "nullptr", in(0), in(1), in(2),
                        n(op.operands[1]) / w[0], w[0], w[1]);
      return true;
    }
    case OpKind::LMHead: {
      auto t = shape(op.operands[1]);
      out = fmt::format("lmHead({}, {}, {}, {}, {}, {});", res(0), in(0), in(1), n(o0) / t[1], t[1],
                        t[0]);
      return true;
    }
    case OpKind::LMHeadGrad: {
      auto t = shape(op.operands[2]);
      out = fmt::format("lmHeadGrad({}, {}, {}, {}, {}, {}, {}, {});", res(0), res(1), in(0), in(1),
                        in(2), n(op.operands[1]) / t[1], t[1], t[0]);
      return true;
    }
    case OpKind::Attention:
    case OpKind::AttentionGrad: {
      AttentionGeometry g = attentionGeometry(st, op);
      std::string q = in(g.firstInput);
      std::string k = g.fused ? fmt::format("{} + {}", q, g.kOffset) : in(g.firstInput + 1);
      std::string v = g.fused ? fmt::format("{} + {}", q, g.vOffset) : in(g.firstInput + 2);
      std::string shapeArg =
          fmt::format("AttentionShape{{{}, {}, {}, {}, {}, {}}}", g.batch, g.seq, g.heads,
                      g.kvHeads, g.headDim, flag("causal") ? "true" : "false");
      if (op.kind == OpKind::Attention) {
        out = fmt::format("attention({}, {}, {}, {}, {}, {}, {}, {});", res(0), res(1), q, k, v,
                          g.qStride, g.kvStride, shapeArg);
      } else {
        std::string dq = res(0), dk = g.fused ? fmt::format("{} + {}", dq, g.kOffset) : res(1),
                    dv = g.fused ? fmt::format("{} + {}", dq, g.vOffset) : res(2);
        out = fmt::format("attentionGrad({}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {});", dq, dk,
                          dv, in(0), q, k, v, in(g.outOperand), in(g.outOperand + 1), g.qStride,
                          g.kvStride, shapeArg);
      }
      return true;
    }
    case OpKind::Rope:
    case OpKind::RopeGrad: {
      auto s = shape(o0);
      int64_t hd = static_cast<int64_t>(num("head_dim", 1));
      out = fmt::format("{}({}, {}, {}, {}, {}, {}, float({}));",
                        op.kind == OpKind::Rope ? "rope" : "ropeGrad", res(0), in(0), s[0], s[1],
                        s[2] / hd, hd, num("theta", 10000.0));
      return true;
    }
    case OpKind::Gelu:
      out = fmt::format("gelu({}, {}, {});", res(0), in(0), n(r0));
      return true;
    case OpKind::GeluGrad:
      out = fmt::format("geluGrad({}, {}, {}, {});", res(0), in(0), in(1), n(r0));
      return true;
    case OpKind::Silu:
      out = fmt::format("silu({}, {}, {});", res(0), in(0), n(r0));
      return true;
    case OpKind::SiluGrad:
      out = fmt::format("siluGrad({}, {}, {}, {});", res(0), in(0), in(1), n(r0));
      return true;
    case OpKind::Mul:
      out = fmt::format("mul({}, {}, {}, {});", res(0), in(0), in(1), n(r0));
      return true;
    case OpKind::MulGrad:
      out = fmt::format("mulGrad({}, {}, {}, {}, {}, {});", res(0), res(1), in(0), in(1), in(2),
                        n(r0));
      return true;
    case OpKind::CrossEntropy: {
      int64_t vocab = shape(o0).back();
      out = fmt::format("C.crossEntropy({}, {}, {}, {}, {}, {}, {});", res(0), res(1), in(0), in(1),
                        n(o0) / vocab, vocab,
                        flag("vocab_parallel") ? "/*vocabParallel=*/true"
                                               : "/*vocabParallel=*/false");
      return true;
    }
    case OpKind::CrossEntropyGrad: {
      int64_t vocab = shape(op.operands[1]).back();
      out = fmt::format("C.crossEntropyGrad({}, {}, {}, {}, {}, {}, {}, {});", res(0), in(0), in(1),
                        in(2), in(3), n(op.operands[1]) / vocab, vocab,
                        flag("vocab_parallel") ? "/*vocabParallel=*/true"
                                               : "/*vocabParallel=*/false");
      return true;
    }
    default:
      return false;
    }
  }

  /// A region function. Each buffer of `releaseAfterLastRead` (saved
  /// activations no later function reads) is freed right after the op that
  /// reads it last, as the performance model's liveness assumes.
  /// In a layer's forward, `recomputed` (the activations a checkpointed
  /// layer's backward recomputes) are released after their last use only
  /// when the frame says so (Frame::releaseIfRecomputed).
  /// `allocatedAtWrite` (what the run hands to the next one, and what a
  /// checkpointed layer drops) gets memory right before the op that writes
  /// it, when it has none (Frame::allocate).
  bool function(const std::string &name, const std::vector<LoweredOp> &ops, DiagnosticEngine &diag,
                const std::set<int> &releaseAfterLastRead = {},
                const std::set<int> &recomputed = {}, const std::set<int> &allocatedAtWrite = {}) {
    std::map<int, size_t> lastRead, lastUse, firstWrite;
    for (size_t i = ops.size(); i-- > 0;)
      for (int b : ops[i].results)
        if (allocatedAtWrite.count(b))
          firstWrite[b] = i;
    for (size_t i = 0; i < ops.size(); ++i) {
      for (int b : ops[i].operands) {
        if (releaseAfterLastRead.count(b))
          lastRead[b] = i;
        if (recomputed.count(b))
          lastUse[b] = i;
      }
      for (int b : ops[i].results)
        if (recomputed.count(b))
          lastUse[b] = i;
    }
    std::string body;
    for (size_t i = 0; i < ops.size(); ++i) {
      const LoweredOp &op = ops[i];
      std::string text;
      if (!call(op, text)) {
        diag.error(
            {}, fmt::format("the trainer cannot run '{}' on CPU ranks yet", opName(op.kind).str()));
        return false;
      }
      for (auto [b, at] : firstWrite)
        if (at == i)
          body += fmt::format("  {}.allocate({}, {});\n", frameOf(b), named(b), n(b));
      body += "  // " + irLine(op) + "\n  " + text + "\n";
      std::vector<std::string> released;
      for (auto [b, at] : lastRead)
        if (at == i)
          released.push_back(fmt::format("{}.release({});", frameOf(b), named(b)));
      if (!released.empty())
        body += fmt::format("  {} // last read\n", fmt::join(released, " "));
      std::vector<std::string> dropped;
      for (auto [b, at] : lastUse)
        if (at == i)
          dropped.push_back(fmt::format("L.releaseIfRecomputed({});", named(b)));
      if (!dropped.empty())
        body += fmt::format("  {} // last forward use; recomputed if checkpointed\n",
                            fmt::join(dropped, " "));
    }
    // Every region function has the same signature; a frame it does not
    // touch keeps its parameter unnamed.
    auto param = [&](const char *type, const char *name) {
      bool used = body.find(std::string(name) + ".") != std::string::npos;
      return fmt::format("{} &{}", type, used ? name : fmt::format("/*{}*/", name));
    };
    os << fmt::format("void {}({}, {}, {}) {{\n", name, param("Frame", "G"), param("Frame", "L"),
                      param("TpContext", "C"))
       << body << "}\n\n";
    return true;
  }

  const Module &m;
  const LoweredStage &st;
  llvm::raw_ostream &os;
  std::set<int> layerOwned;
  std::vector<std::string> idents; ///< per buffer: its name in `buf`
};

} // namespace

namespace {

/// What one stage of the plan runs: its regions, the buffers they touch and
/// the parameters they read.
struct StageUse {
  bool pre = false, post = false;
  std::set<int> buffers;
  std::set<int> forward; ///< read or written by a forward op, or a forward input/output
  std::set<int> saved;   ///< of those, read by a backward op: kept from forward to backward
};

StageUse stageUse(const LoweredStage &st, bool first, bool last) {
  StageUse u;
  u.pre = first;
  u.post = last;
  for (int r = 0; r < 3; ++r) {
    if ((r == 0 && !first) || (r == 2 && !last))
      continue;
    const LoweredRegion &lr = st.regions[r];
    for (const auto *ops : {&lr.forward, &lr.backward})
      for (const LoweredOp &op : *ops) {
        u.buffers.insert(op.operands.begin(), op.operands.end());
        u.buffers.insert(op.results.begin(), op.results.end());
        if (ops == &lr.forward) {
          u.forward.insert(op.operands.begin(), op.operands.end());
          u.forward.insert(op.results.begin(), op.results.end());
        }
      }
    for (const auto *ids : {&lr.inputs, &lr.outputs, &lr.gradInputs, &lr.gradOutputs})
      u.buffers.insert(ids->begin(), ids->end());
    u.forward.insert(lr.inputs.begin(), lr.inputs.end());
    u.forward.insert(lr.outputs.begin(), lr.outputs.end());
    for (const LoweredOp &op : lr.backward)
      u.saved.insert(op.operands.begin(), op.operands.end());
  }
  if (first)
    u.buffers.insert(st.moduleInputs[0]);
  if (last)
    u.buffers.insert(st.moduleInputs[1]);
  u.forward.insert(u.buffers.count(st.moduleInputs[0]) ? st.moduleInputs[0] : -1);
  u.forward.insert(u.buffers.count(st.moduleInputs[1]) ? st.moduleInputs[1] : -1);
  std::set<int> saved;
  for (int b : u.saved)
    if (u.forward.count(b))
      saved.insert(b);
  u.saved = std::move(saved);
  return u;
}

/// A parameter of the stage: its buffer and the gradient buffers that
/// contribute to it (a tied weight gets one from each region reading it).
struct StageParam {
  const ParamLayout *layout;
  int buffer;
  std::vector<int64_t> grads;
};

std::vector<StageParam> stageParams(const LoweredStage &st, const StageUse &use) {
  std::vector<StageParam> out;
  for (const ParamLayout &p : st.params) {
    StageParam sp{&p, -1, {}};
    for (size_t b = 0; b < st.buffers.size(); ++b) {
      const std::string &n = st.buffers[b].name;
      if (n == p.name && st.buffers[b].role == Role::Param)
        sp.buffer = int(b);
      if (st.buffers[b].role == Role::Grad && use.buffers.count(int(b)) &&
          (n == p.name + ".grad" || n.rfind(p.name + ".grad.", 0) == 0))
        sp.grads.push_back(int64_t(b));
    }
    if (sp.buffer >= 0 && use.buffers.count(sp.buffer))
      out.push_back(std::move(sp)); // else another stage's
  }
  return out;
}

/// Whether buffer `b` is a parameter of the stage or one of its gradients.
bool isParameterBuffer(const std::vector<StageParam> &params, int b) {
  return std::any_of(params.begin(), params.end(), [&](const StageParam &p) {
    return p.buffer == b || std::find(p.grads.begin(), p.grads.end(), int64_t(b)) != p.grads.end();
  });
}

/// What a checkpointed layer recomputes before its backward: its saved
/// float activations but its input (kept) and its output (carried on);
/// the same set as StageMemory::recomputed().
std::set<int> recomputedByCheckpoint(const LoweredStage &st, const std::set<int> &layerSaved) {
  const LoweredRegion &layer = st.region(RegionKind::Layer);
  std::set<int> out;
  for (int b : layerSaved)
    if (st.buffers[size_t(b)].dtype != DType::I32 &&
        std::find(layer.inputs.begin(), layer.inputs.end(), b) == layer.inputs.end() &&
        std::find(layer.outputs.begin(), layer.outputs.end(), b) == layer.outputs.end())
      out.insert(b);
  return out;
}

/// Whether `region`'s ops read buffer `b`.
bool reads(const LoweredRegion &region, int b) {
  for (const auto *ops : {&region.forward, &region.backward})
    for (const LoweredOp &op : *ops)
      for (int o : op.operands)
        if (o == b)
          return true;
  return false;
}

std::string joined(const std::vector<int64_t> &values) {
  std::string s;
  for (int64_t v : values)
    s += (s.empty() ? "" : ", ") + std::to_string(v);
  return s;
}

const char *boolean(bool b) { return b ? "true" : "false"; }

std::string percent(double fraction) { return fmt::format("{:g}%", 100 * fraction); }

/// "dp 2 x tp 1" of a stage.
std::string split(const StagePlan &sp) { return fmt::format("dp {} x tp {}", sp.dp, sp.tp); }

/// One statement of a schedule with its comment, aligned.
void step(llvm::raw_ostream &os, const std::string &call, const std::string &why = "") {
  if (why.empty())
    os << "  " << call << "\n";
  else
    os << fmt::format("  {:<44} // {}\n", call, why);
}

/// Stage i's schedule: the steps of one micro-batch's forward and backward
/// and of the optimizer, as calls to mist::rt::StageRunner, each placed and
/// commented as the plan's knobs say.
void emitStageSchedule(const Plan &plan, int i, llvm::raw_ostream &os) {
  const StagePlan &sp = plan.stages[i];
  const int stages = static_cast<int>(plan.stages.size());
  const bool first = i == 0, last = i + 1 == stages;
  const bool zero1 = sp.zero.optimizer && sp.dp > 1, zero2 = zero1 && sp.zero.grads,
             zero3 = zero2 && sp.zero.weights;
  const std::string acquireWhy =
      zero3 ? fmt::format("g2g: all-gather its ZeRO-3 slices over dp {}", sp.dp)
      : sp.offload.weights > 0
          ? fmt::format("h2d: swap in the {} kept in host memory", percent(sp.offload.weights))
          : "wait for its last optimizer update";
  const std::string releaseWhy = zero3 ? "drop the gathered weights"
                                 : sp.offload.weights > 0
                                     ? fmt::format("d2h: swap {} out", percent(sp.offload.weights))
                                     : "nothing to move";
  // Weights that move between uses (ZeRO-3, weight offload) are brought in
  // for the next region while this one computes: `ahead` names it, and it is
  // prefetched right before this region's call.
  const bool movesWeights = zero3 || sp.offload.weights > 0;
  struct Region {
    std::string kind;
    int layer;
  };
  auto prefetch = [&](const std::optional<Region> &ahead) {
    if (movesWeights && ahead)
      step(os, fmt::format("r.prefetchWeights(RegionKind::{}, {});", ahead->kind, ahead->layer),
           zero3 ? "the next region's gather runs beside this one"
                 : "the next region's swap-in "
                   "runs beside this one");
  };
  auto around = [&](const char *region, int layer, const std::string &call, const std::string &why,
                    const std::optional<Region> &ahead) {
    step(os, fmt::format("r.acquireWeights(RegionKind::{}, {});", region, layer), acquireWhy);
    prefetch(ahead);
    step(os, call, why);
    step(os, fmt::format("r.releaseWeights(RegionKind::{}, {});", region, layer), releaseWhy);
  };
  const int firstCheckpointed = sp.layers() - sp.ckptLayers;
  os << fmt::format("// Stage {}'s forward of micro-batch mb (layers {}-{}, {}).\n", i,
                    sp.firstLayer, sp.lastLayer, split(sp));
  os << fmt::format("void s{}_forward(StageRunner &r, int step, int mb) {{\n", i);
  step(os, "r.beginForward(mb);", "its activations get a slot of the stage's memory");
  if (first || last)
    step(os, "r.loadData(step, mb);",
         first && last ? "tokens and targets"
         : first       ? "tokens"
                       : "targets");
  const std::optional<Region> firstLayer =
      sp.layers() > 0 ? std::optional<Region>(Region{"Layer", 0}) : std::nullopt;
  if (first)
    around("Pre", 0, "r.forwardPre(mb);", "embeddings", firstLayer);
  else
    step(os, "r.receiveActivations(mb);",
         fmt::format("g2g: from stage {} ({}){}", i - 1, split(plan.stages[i - 1]),
                     plan.stages[i - 1].dp == sp.dp ? "" : ", re-sliced"));
  for (int l = 0; l < sp.layers(); ++l) {
    std::optional<Region> ahead;
    if (l + 1 < sp.layers())
      ahead = Region{"Layer", l + 1};
    else if (last)
      ahead = Region{"Post", 0};
    around("Layer", l, fmt::format("r.forwardLayer({}, mb);", l),
           fmt::format("layer {}", sp.firstLayer + l), ahead);
    if (l >= firstCheckpointed)
      step(os, fmt::format("r.dropRecomputable({});", l), "checkpointed: keep only its input");
  }
  if (last)
    around("Post", 0, "r.forwardPost(step, mb);", "final norm, LM head, loss", std::nullopt);
  else
    step(os, "r.sendActivations(mb);",
         fmt::format("g2g: to stage {} ({})", i + 1, split(plan.stages[i + 1])));
  step(os, "r.stashActivations(mb);",
       sp.offload.activations > 0 ? fmt::format("kept for the backward; d2h: {} to host memory",
                                                percent(sp.offload.activations))
                                  : "kept in its slot for the backward");
  os << "}\n\n";

  os << fmt::format("// Stage {}'s backward of micro-batch mb.\n", i);
  os << fmt::format("void s{}_backward(StageRunner &r, int mb) {{\n", i);
  step(os, "r.unstashActivations(mb);",
       sp.offload.activations > 0 ? "h2d: the offloaded part comes back" : "");
  step(os, "r.clearGradients();");
  const std::optional<Region> lastLayer =
      sp.layers() > 0 ? std::optional<Region>(Region{"Layer", sp.layers() - 1}) : std::nullopt;
  if (last)
    around("Post", 0, "r.backwardPost(mb);", "d loss / d x", lastLayer);
  else
    step(os, "r.receiveGradients(mb);", fmt::format("g2g: from stage {}", i + 1));
  for (int l = sp.layers() - 1; l >= 0; --l) {
    step(os, fmt::format("r.acquireWeights(RegionKind::Layer, {});", l), acquireWhy);
    if (l > 0)
      prefetch(Region{"Layer", l - 1});
    else if (first)
      prefetch(Region{"Pre", 0});
    if (l >= firstCheckpointed)
      step(os, fmt::format("r.recomputeLayer({}, mb);", l), "checkpointed: forward again");
    step(os, fmt::format("r.backwardLayer({}, mb);", l),
         fmt::format("layer {}", sp.firstLayer + l));
    step(os, fmt::format("r.releaseWeights(RegionKind::Layer, {});", l), releaseWhy);
  }
  if (first)
    around("Pre", 0, "r.backwardPre(mb);", "embedding gradients", std::nullopt);
  else
    step(os, "r.sendGradients(mb);", fmt::format("g2g: to stage {}", i - 1));
  step(os, "r.foldGradients();",
       (zero2 ? fmt::format("ZeRO-2: each region's gradients were reduce-scattered over dp {} "
                            "after its backward (g2g); the rest here",
                            sp.dp)
              : std::string("add into the step's gradient sums")) +
           (sp.offload.grads > 0
                ? fmt::format(" ({} of them in host memory)", percent(sp.offload.grads))
                : ""));
  os << "}\n\n";

  os << fmt::format("// Stage {}'s optimizer, in the order the next forward reads the weights.\n",
                    i);
  if (zero1)
    os << fmt::format("// ZeRO-1: AdamW on this rank's slice, then {} over dp {}.\n",
                      zero3 ? "the slice is the weights" : "all-gather the weights", sp.dp);
  os << fmt::format("void s{}_optimizer(StageRunner &r, const AdamStep &a) {{\n", i);
  const std::string stateWhy =
      sp.offload.optimizer > 0 ? fmt::format("h2d/d2h: {} of the optimizer state in host memory",
                                             percent(sp.offload.optimizer))
                               : "";
  if (first)
    step(os, "r.optimizerStep(a, RegionKind::Pre, 0);", stateWhy);
  for (int l = 0; l < sp.layers(); ++l)
    step(os, fmt::format("r.optimizerStep(a, RegionKind::Layer, {});", l), stateWhy);
  if (last)
    step(os, "r.optimizerStep(a, RegionKind::Post, 0);", stateWhy);
  os << "}\n\n";
}

} // namespace

bool mist::emitTrainer(const Module &m, const Plan &plan, const TrainerSource &src,
                       DiagnosticEngine &diag, llvm::raw_ostream &os) {
  const int stages = static_cast<int>(plan.stages.size());
  for (int i = 0; i < stages; ++i) {
    const ZeroFlags &z = plan.stages[i].zero;
    if ((z.weights && !z.grads) || (z.grads && !z.optimizer)) {
      diag.error({}, fmt::format("stage {}: the trainer splits weights only with gradients, and "
                                 "gradients only with the optimizer state (ZeRO-3 includes 2, "
                                 "ZeRO-2 includes 1)",
                                 i));
      return false;
    }
  }
  for (const Region *r : m.regions)
    for (const auto &op : r->fwd.ops)
      if (op->kind == OpKind::Dropout && op->realAttr("p").value_or(0) > 0) {
        diag.error(op->loc, "the trainer does not run dropout with p > 0 yet");
        return false;
      }
  // The runtime stores and computes in fp32 only (TF32 GEMMs); a plan priced
  // for 2-byte weights and activations would need about twice the memory it
  // was proven to fit in, so say so rather than run it silently.
  const bool fp32StandIn = m.train.dtype != DType::F32;
  const bool narrowGrads = dtypeBytes(m.train.gradientDtype()) < 4;
  if (fp32StandIn)
    diag.warning({}, fmt::format("the trainer runs in fp32 (TF32 GEMMs) only: this plan was "
                                 "priced for dtype = {}, so its predicted memory and time do not "
                                 "apply to the trainer (weights{} and activations take twice the "
                                 "bytes); put `dtype = f32` in the train section to plan for what "
                                 "the trainer runs",
                                 dtypeName(m.train.dtype).str(), narrowGrads ? ", gradients" : ""));
  std::vector<LoweredStage> lowered;
  for (const StagePlan &sp : plan.stages) {
    auto st = lowerForStage(m, sp.microBatch, sp.tp, diag);
    if (!st)
      return false;
    lowered.push_back(std::move(*st));
  }
  int ranks = 0;
  for (const StagePlan &sp : plan.stages)
    ranks += sp.dp * sp.tp;
  os << fmt::format("// train.cu for {}, generated by mistc from {}.\n", m.name, src.modelFile);
  os << fmt::format(
      "// Plan: {} stage{}, {} micro-batches per step (global batch {}), {} rank{}.\n", stages,
      stages == 1 ? "" : "s", plan.gradAccum, plan.globalBatch, ranks, ranks == 1 ? "" : "s");
  for (int i = 0; i < stages; ++i) {
    const StagePlan &sp = plan.stages[i];
    os << fmt::format("//   stage {}: layers {}-{}, micro-batch {}, dp {}, tp {}, {} checkpointed, "
                      "ZeRO {}{}{}, offload w {} g {} o {} a {}\n",
                      i, sp.firstLayer, sp.lastLayer, sp.microBatch, sp.dp, sp.tp, sp.ckptLayers,
                      sp.zero.optimizer ? "o" : "-", sp.zero.grads ? "g" : "-",
                      sp.zero.weights ? "w" : "-", sp.offload.weights, sp.offload.grads,
                      sp.offload.optimizer, sp.offload.activations);
  }
  if (fp32StandIn)
    os << fmt::format("// Precision: fp32 (TF32 GEMMs), not the plan's {}: see the warning mistc "
                      "printed; the plan's memory and time figures do not apply.\n",
                      dtypeName(m.train.dtype).str());
  os << "// Build for CPU ranks:\n";
  os << fmt::format("//   mpicxx -std=c++20 -O2 -DMIST_CPU -I{0} -x c++ train.cu -x none "
                    "{1}/runtime/trainer/libmistrtTrainer.a {1}/runtime/ops/libmistrtOps.a "
                    "{1}/runtime/device/libmistrtDeviceHost.a "
                    "{1}/runtime/comm/libmistrtComm.a {1}/runtime/data/libmistrtData.a "
                    "{1}/runtime/checkpoint/libmistrtCheckpoint.a "
                    "{1}/stdlib/kernels/libmistKernelsRef.a {1}/format/libmistFormat.a -o train\n",
                    src.sourceRoot, src.buildDir);
  os << "// Build for a GPU (BUILD: a build of this tree with CUDA, e.g. "
        "-DMIST_RUNTIME_ONLY=ON):\n";
  os << "//   scripts/compile-trainer.sh gpu train.cu BUILD train   (from the source tree named by "
        "-I above)\n";
  os << fmt::format(
      "// Run: mpirun -np {} ./train --steps 20 [--lr X] [--seed N] [--log-every N] "
      "[--data tokens.bin [--shuffle]] [--ckpt-dir DIR [--ckpt-every N] [--resume]] [--trace "
      "timeline.json]\n",
      ranks);
  os << "// Editing: the training hyper-parameters (lr, betas, eps, weight decay, gradient "
        "clipping,\n"
        "// warmup) are the spec.* lines at the end of main(); change one and rebuild with the "
        "line\n"
        "// above. Each stage's code names its buffers (sN::buf) and states every size; the "
        "sizes,\n"
        "// the stage tables and the schedule follow from the plan, so to change the model, the\n"
        "// batch or the parallelism, edit the .mist file or the plan and run mistc again.\n\n";
  os << "#include \"runtime/ops/Ops.h\"\n#include \"runtime/trainer/StageRunner.h\"\n"
        "#include \"runtime/trainer/TpContext.h\"\n"
        "#include \"runtime/trainer/Trainer.h\"\n\n";
  os << "using namespace mist::rt;\nusing namespace mist::rt::ops;\n\nnamespace {\n\n";
  const char *names[3][2] = {{"preForward", "preBackward"},
                             {"layerForward", "layerBackward"},
                             {"postForward", "postBackward"}};
  int64_t vocab = 0, seqLen = 0;
  for (int i = 0; i < stages; ++i) {
    const StagePlan &sp = plan.stages[i];
    const LoweredStage &st = lowered[i];
    const bool first = i == 0, last = i + 1 == stages;
    const StageUse use = stageUse(st, first, last);
    Emitter e(m, st, os);
    const std::string prefix = fmt::format("s{}_", i);
    os << fmt::format("// ======== stage {}: layers {}-{}, micro-batch {}, tp {} ========\n\n", i,
                      sp.firstLayer, sp.lastLayer, sp.microBatch, sp.tp);
    os << fmt::format("namespace s{} {{\n\n", i);
    os << "// The stage's buffers, by their IR names: G.at(buf::x) in the global frame, L.at(...)\n"
          "// in the frame of the layer being computed.\nnamespace buf {\nenum : int {\n";
    for (size_t b = 0; b < st.buffers.size(); ++b)
      os << fmt::format("  {} = {},\n", e.idents[b], b);
    os << "};\n} // namespace buf\n\n";
    const std::vector<StageParam> params = stageParams(st, use);
    const LoweredRegion &pre = st.region(RegionKind::Pre), &layer = st.region(RegionKind::Layer),
                        &post = st.region(RegionKind::Post);
    // Saved activations by the backward that reads them last: a layer's
    // own; the global ones pre's backward reads; the rest post's.
    std::set<int> savedBy[3];
    for (int b : use.saved) {
      if (isParameterBuffer(params, b))
        continue;
      const int r = e.layerOwned.count(b) ? 1 : first && reads(pre, b) ? 0 : 2;
      savedBy[r].insert(b);
    }
    // Each backward also frees the gradient handed to it once read (an
    // array of its own: see the scratch planning below).
    std::set<int> releasedBy[3] = {savedBy[0], savedBy[1], savedBy[2]};
    releasedBy[1].insert(layer.gradInputs.begin(), layer.gradInputs.end());
    if (first)
      releasedBy[0].insert(pre.gradInputs.begin(), pre.gradInputs.end());
    for (int r = 0; r < 3; ++r) {
      if ((r == 0 && !first) || (r == 2 && !last))
        continue;
      const LoweredRegion &lr = st.regions[r];
      os << fmt::format("// ---- {} ----\n", regionName(lr.kind));
      // Handed to the next run: allocated at write, moved out after the run.
      std::set<int> fwdOut(lr.outputs.begin(), lr.outputs.end()),
          bwdOut(lr.gradOutputs.begin(), lr.gradOutputs.end());
      if (r == 2)
        fwdOut.clear(); // the loss stays in post's frame
      const std::set<int> recomputed =
          r == 1 ? recomputedByCheckpoint(st, savedBy[1]) : std::set<int>{};
      fwdOut.insert(recomputed.begin(), recomputed.end());
      if (!e.function(prefix + names[r][0], lr.forward, diag, {}, recomputed, fwdOut) ||
          !e.function(prefix + names[r][1], lr.backward, diag, releasedBy[r], {}, bwdOut))
        return false;
    }
    seqLen = st.buffers[st.moduleInputs[0]].shape[1];
    if (last)
      for (const LoweredOp &op : st.region(RegionKind::Post).forward)
        if (op.kind == OpKind::CrossEntropy) { // this rank's logits: a slice when vocab-parallel
          auto vp = op.words.find("vocab_parallel");
          vocab = st.buffers[op.operands[0]].shape.back() *
                  (vp != op.words.end() && vp->second == "true" ? sp.tp : 1);
        }
    emitStageSchedule(plan, i, os);
    // The stage's tables.
    os << fmt::format("StageSpec stage{}() {{\n  StageSpec s;\n", i);
    os << fmt::format("  s.firstLayer = {};\n  s.layers = {};\n  s.microBatch = {};\n  s.dp = {};\n"
                      "  s.tp = {};\n  s.ckptLayers = {};\n",
                      sp.firstLayer, sp.layers(), sp.microBatch, sp.dp, sp.tp, sp.ckptLayers);
    os << fmt::format("  s.zeroOptimizer = {};\n  s.zeroGrads = {};\n  s.zeroWeights = {};\n",
                      boolean(sp.zero.optimizer), boolean(sp.zero.grads), boolean(sp.zero.weights));
    os << fmt::format(
        "  s.offloadWeights = {};\n  s.offloadGrads = {};\n  s.offloadOptimizer = {};\n"
        "  s.offloadActivations = {};\n",
        sp.offload.weights, sp.offload.grads, sp.offload.optimizer, sp.offload.activations);
    // Scratch: what is neither a parameter (or its gradient) nor kept from a
    // forward to its backward; it shares one arena, planned by liveness.
    std::vector<bool> scratch(st.buffers.size(), false);
    for (size_t b = 0; b < st.buffers.size(); ++b)
      scratch[b] = use.buffers.count(int(b)) && !use.saved.count(int(b));
    for (const StageParam &p : params) {
      scratch[size_t(p.buffer)] = false;
      for (int64_t g : p.grads)
        scratch[size_t(g)] = false;
    }
    // What the runtime hands from one run to the next (the activation
    // between regions, and its gradient) gets an array of its own, which it
    // moves instead of copying out of an arena (StageRunner::handIn/handOut).
    for (const std::vector<int> *carried : {&layer.outputs, &layer.gradInputs, &layer.gradOutputs,
                                            &pre.outputs, &pre.gradInputs, &post.gradOutputs})
      for (int b : *carried)
        scratch[size_t(b)] = false;
    const ScratchPlan arena = planScratch(st, scratch, first, last);
    os << fmt::format("  s.scratchBytes = {{{}}}; // arenas: pre, layer, post; forward, backward\n",
                      fmt::join(arena.bytes, ", "));
    os << "  s.buffers = {\n";
    for (size_t b = 0; b < st.buffers.size(); ++b) {
      const LoweredBuffer &buf = st.buffers[b];
      const bool used = use.buffers.count(int(b)) > 0;
      // Fields left out keep their defaults (false, -1: see BufferSpec).
      std::string fields =
          fmt::format(".name = \"{}\", .elements = {}, .kind = BufferKind::{}", buf.name,
                      used ? buf.elements() : 0, buf.dtype == DType::I32 ? "Ids" : "Float");
      if (e.layerOwned.count(int(b)))
        fields += ", .layer = true";
      if (used && use.forward.count(int(b)))
        fields += ", .forward = true";
      if (used && use.saved.count(int(b)))
        fields += ", .saved = true";
      if (arena.run[b] >= 0)
        fields +=
            fmt::format(", .scratchRun = {}, .scratchOffset = {}", arena.run[b], arena.offset[b]);
      os << fmt::format("      {{{}}},{}\n", fields, used ? "" : " // not on this stage");
    }
    os << "  };\n  s.params = {\n";
    for (const StageParam &sp : params) {
      const ParamLayout &p = *sp.layout;
      const int buffer = sp.buffer;
      const std::vector<int64_t> &grads = sp.grads;
      const bool inPre = reads(pre, buffer), inPost = reads(post, buffer);
      std::vector<std::string> regions;
      if (first && inPre)
        regions.push_back("RegionKind::Pre");
      if (reads(layer, buffer))
        regions.push_back("RegionKind::Layer");
      if (last && inPost)
        regions.push_back("RegionKind::Post");
      const bool tied = stages > 1 && inPre && inPost;
      std::vector<std::string> gradNames;
      for (int64_t g : grads)
        gradNames.push_back(e.named(int(g)));
      os << fmt::format("      {{.name = \"{}\", .buffer = {}, .grads = {{{}}}, .shape = {{{}}}, "
                        ".shardAxis = {}, .groups = {{{}}}, .regions = {{{}}}{}}},\n",
                        p.name, e.named(buffer), fmt::join(gradNames, ", "), joined(p.fullShape),
                        p.shardAxis, joined(p.groups), fmt::join(regions, ", "),
                        tied ? ", .tiedAcrossStages = true" : "");
    }
    os << "  };\n";
    auto io = [&](const char *field, int value, bool present) {
      os << fmt::format("  s.{} = {};\n", field, present ? e.named(value) : "-1");
    };
    io("tokensBuffer", st.moduleInputs[0], first);
    io("targetsBuffer", st.moduleInputs[1], last);
    io("lossBuffer", post.outputs.at(0), last);
    io("preOut", pre.outputs.at(0), first);
    io("layerIn", layer.inputs.at(0), true);
    io("layerOut", layer.outputs.at(0), true);
    io("postIn", post.inputs.at(0), last);
    io("postGradIn", post.gradInputs.at(0), last);
    io("postGradOut", post.gradOutputs.at(0), last);
    io("layerGradIn", layer.gradInputs.at(0), true);
    io("layerGradOut", layer.gradOutputs.at(0), true);
    io("preGradIn", pre.gradInputs.at(0), first);
    if (last) { // post's saved activations that no pre backward reads: freed after post's backward
      std::vector<std::string> freed;
      for (int b : savedBy[2])
        freed.push_back(e.named(b));
      os << fmt::format("  s.freedAfterPostBackward = {{{}}};\n", fmt::join(freed, ", "));
    }
    for (int r = 0; r < 3; ++r) {
      if ((r == 0 && !first) || (r == 2 && !last))
        continue;
      os << fmt::format("  s.{0} = {1}{0};\n  s.{2} = {1}{2};\n", names[r][0], prefix, names[r][1]);
    }
    std::string order, entries;
    for (auto [mb, forward] : oneFOneB(i, stages, plan.gradAccum)) {
      order += fmt::format(" {}{}", forward ? "F" : "B", mb);
      entries += fmt::format("{}{{{}, {}}}", entries.empty() ? "" : ", ", mb, boolean(forward));
    }
    os << "  // 1F1B:" << order << "\n";
    os << "  s.order = {" << entries << "};\n";
    os << fmt::format("  s.forward = s{0}_forward;\n  s.backward = s{0}_backward;\n"
                      "  s.optimizer = s{0}_optimizer;\n",
                      i);
    os << "  return s;\n}\n\n";
    os << fmt::format("}} // namespace s{}\n\n", i);
  }
  os << "} // namespace\n\nint main(int argc, char **argv) {\n  TrainerSpec spec;\n";
  std::string planText;
  for (int i = 0; i < stages; ++i)
    planText += fmt::format("{}dp {} tp {} b {}", i ? " | " : "", plan.stages[i].dp,
                            plan.stages[i].tp, plan.stages[i].microBatch);
  os << fmt::format("  spec.model = \"{}\";\n  spec.plan = \"{} stage{}: {}, G = {}\";\n", m.name,
                    stages, stages == 1 ? "" : "s", planText, plan.gradAccum);
  std::string stageCalls;
  for (int i = 0; i < stages; ++i)
    stageCalls += fmt::format("{}s{}::stage{}()", i ? ", " : "", i, i);
  os << "  spec.stages = {" << stageCalls << "};\n";
  const TrainConfig &t = m.train;
  os << fmt::format("  spec.seqLen = {};\n  spec.vocab = {};\n  spec.gradAccum = {};\n"
                    "  spec.modelFlopsPerSample = {};\n",
                    seqLen, vocab, plan.gradAccum, src.modelFlopsPerSample);
  os << fmt::format("  spec.device = \"{}\";\n  spec.devicePeakTflops = {};\n", src.deviceName,
                    src.devicePeakTflops);
  os << fmt::format(
      "  spec.lr = float({});\n  spec.beta1 = float({});\n  spec.beta2 = float({});\n"
      "  spec.eps = float({});\n  spec.weightDecay = float({});\n  spec.gradClip = float({});\n"
      "  spec.warmupSteps = {};\n",
      t.lr, t.beta1, t.beta2, t.eps, t.weightDecay, t.gradClip, t.warmupSteps);
  os << "  return runTrainer(spec, argc, argv);\n}\n";
  return true;
}
