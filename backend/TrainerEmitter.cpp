//===- TrainerEmitter.cpp - Writes train.cu for a plan --------------------===//
#include "backend/TrainerEmitter.h"

#include <fmt/format.h>
#include <set>

using namespace mist;

namespace {

class Emitter {
public:
  Emitter(const Module &m, const LoweredStage &st, llvm::raw_ostream &os) : m(m), st(st), os(os) {
    const LoweredRegion &layer = st.region(RegionKind::Layer);
    for (const auto *ops : {&layer.forward, &layer.backward})
      for (const LoweredOp &op : *ops) {
        layerOwned.insert(op.operands.begin(), op.operands.end());
        layerOwned.insert(op.results.begin(), op.results.end());
      }
    layerOwned.insert(layer.inputs.begin(), layer.inputs.end());
    layerOwned.insert(layer.gradInputs.begin(), layer.gradInputs.end());
  }

  /// `G.at(i)` or `L.at(i)`: the global frame or this layer's.
  std::string ref(int i) const {
    bool ids = st.buffers[i].dtype == DType::I32;
    return fmt::format("{}.{}({})", layerOwned.count(i) ? "L" : "G", ids ? "ids" : "at", i);
  }
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
      out = fmt::format("{}[0] = {}crossEntropy({}, {}, {}, {}, {});", res(0),
                        flag("vocab_parallel") ? "C." : "", res(1), in(0), in(1), n(o0) / vocab,
                        vocab);
      return true;
    }
    case OpKind::CrossEntropyGrad: {
      int64_t vocab = shape(op.operands[1]).back();
      out = fmt::format("{}crossEntropyGrad({}, {}[0], {}, {}, {}, {}, {});",
                        flag("vocab_parallel") ? "C." : "", res(0), in(0), in(1), in(2), in(3),
                        n(op.operands[1]) / vocab, vocab);
      return true;
    }
    default:
      return false;
    }
  }

  bool function(const char *name, const std::vector<LoweredOp> &ops, DiagnosticEngine &diag) {
    os << fmt::format("void {}(Frame &G, Frame &L, TpContext &C) {{\n", name);
    for (const LoweredOp &op : ops) {
      std::string text;
      if (!call(op, text)) {
        diag.error(
            {}, fmt::format("the trainer cannot run '{}' on CPU ranks yet", opName(op.kind).str()));
        return false;
      }
      os << "  // " << irLine(op) << "\n  " << text << "\n";
    }
    os << "  (void)G;\n  (void)L;\n  (void)C;\n}\n\n";
    return true;
  }

  const Module &m;
  const LoweredStage &st;
  llvm::raw_ostream &os;
  std::set<int> layerOwned;
};

} // namespace

bool mist::emitTrainer(const Module &m, const Plan &plan, const TrainerSource &src,
                       DiagnosticEngine &diag, llvm::raw_ostream &os) {
  if (plan.stages.size() != 1 || plan.stages[0].zero.weights ||
      (plan.stages[0].zero.grads && !plan.stages[0].zero.optimizer)) {
    diag.error({}, fmt::format(
                       "the trainer runs plans of one stage with ZeRO-1 or ZeRO-2 at most for now; "
                       "this plan has {} stage{}, dp {}, tp {}",
                       plan.stages.size(), plan.stages.size() == 1 ? "" : "s", plan.stages[0].dp,
                       plan.stages[0].tp));
    return false;
  }
  const StagePlan &st0 = plan.stages[0];
  for (const Region *r : m.regions)
    for (const auto &op : r->fwd.ops)
      if (op->kind == OpKind::Dropout && op->realAttr("p").value_or(0) > 0) {
        diag.error(op->loc, "the trainer does not run dropout with p > 0 yet");
        return false;
      }
  auto lowered = lowerForStage(m, st0.microBatch, st0.tp, diag);
  if (!lowered)
    return false;
  const LoweredStage &st = *lowered;
  Emitter e(m, st, os);
  const int layers = st0.layers();
  os << fmt::format("// train.cu for {}, generated by mistc from {}: do not edit.\n", m.name,
                    src.modelFile);
  os << fmt::format(
      "// Plan: 1 stage, {} layers, micro-batch {}, {} micro-batches per step (global batch {}), "
      "dp {}, tp {}.\n",
      layers, st0.microBatch, plan.gradAccum, plan.globalBatch, st0.dp, st0.tp);
  os << "// Build for CPU ranks:\n";
  os << fmt::format("//   mpicxx -std=c++20 -O2 -DMIST_CPU -I{0} -x c++ train.cu -x none "
                    "{1}/runtime/trainer/libmistrtTrainer.a {1}/runtime/ops/libmistrtOps.a "
                    "{1}/runtime/comm/libmistrtComm.a {1}/runtime/data/libmistrtData.a "
                    "{1}/runtime/checkpoint/libmistrtCheckpoint.a "
                    "{1}/stdlib/kernels/libmistKernelsRef.a -o train\n",
                    src.sourceRoot, src.buildDir);
  os << fmt::format("// Run: mpirun -np {} ./train --steps 20 [--lr X] [--seed N] [--log-every N] "
                    "[--data tokens.bin] [--ckpt-dir DIR [--ckpt-every N] [--resume]] [--trace "
                    "timeline.json]\n\n",
                    st0.dp * st0.tp);
  os << "#include \"runtime/ops/CpuOps.h\"\n#include \"runtime/trainer/TpContext.h\"\n"
        "#include \"runtime/trainer/Trainer.h\"\n\n";
  os << "using namespace mist::rt;\nusing namespace mist::rt::ops;\n\nnamespace {\n\n";
  const char *names[3][2] = {{"preForward", "preBackward"},
                             {"layerForward", "layerBackward"},
                             {"postForward", "postBackward"}};
  for (int r = 0; r < 3; ++r) {
    const LoweredRegion &lr = st.regions[r];
    os << fmt::format("// ---- {} ----\n", regionName(lr.kind).str());
    if (!e.function(names[r][0], lr.forward, diag) || !e.function(names[r][1], lr.backward, diag))
      return false;
  }
  os << "} // namespace\n\nint main(int argc, char **argv) {\n  TrainerSpec spec;\n";
  os << fmt::format(
      "  spec.model = \"{}\";\n  spec.plan = \"1 stage, dp {}, tp {}, micro-batch {}, G = {}\";\n",
      m.name, st0.dp, st0.tp, st0.microBatch, plan.gradAccum);
  os << "  spec.buffers = {\n";
  for (size_t i = 0; i < st.buffers.size(); ++i) {
    const LoweredBuffer &b = st.buffers[i];
    os << fmt::format("      {{\"{}\", {}, BufferKind::{}, {}}}, // {}\n", b.name, b.elements(),
                      b.dtype == DType::I32 ? "Ids" : "Float",
                      e.layerOwned.count(int(i)) ? "true" : "false", i);
  }
  os << "  };\n  spec.params = {\n";
  for (const ParamLayout &p : st.params) {
    int buffer = -1;
    std::vector<int> grads;
    for (size_t i = 0; i < st.buffers.size(); ++i) {
      const std::string &n = st.buffers[i].name;
      if (n == p.name && st.buffers[i].role == Role::Param)
        buffer = int(i);
      if (st.buffers[i].role == Role::Grad &&
          (n == p.name + ".grad" || n.rfind(p.name + ".grad.", 0) == 0))
        grads.push_back(int(i));
    }
    std::string g, shape;
    for (int i : grads)
      g += (g.empty() ? "" : ", ") + std::to_string(i);
    for (int64_t d : p.fullShape)
      shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    std::string groups;
    for (int64_t gsize : p.groups)
      groups += (groups.empty() ? "" : ", ") + std::to_string(gsize);
    os << fmt::format("      {{\"{}\", {}, {{{}}}, {{{}}}, {}, {{{}}}}},\n", p.name, buffer, g,
                      shape, p.shardAxis, groups);
  }
  os << "  };\n";
  const LoweredRegion &pre = st.region(RegionKind::Pre), &layer = st.region(RegionKind::Layer),
                      &post = st.region(RegionKind::Post);
  const TrainConfig &t = m.train;
  os << fmt::format(
      "  spec.layers = {};\n  spec.microBatch = {};\n  spec.seqLen = {};\n  spec.gradAccum = {};\n"
      "  spec.dp = {};\n  spec.tp = {};\n  spec.ckptLayers = {};\n",
      layers, st0.microBatch, st.buffers[st.moduleInputs[0]].shape[1], plan.gradAccum, st0.dp,
      st0.tp, st0.ckptLayers);
  int64_t vocab = 0;
  for (const LoweredOp &op : post.forward)
    if (op.kind == OpKind::CrossEntropy) { // this rank's logits: a slice when vocabulary-parallel
      auto vp = op.words.find("vocab_parallel");
      vocab = st.buffers[op.operands[0]].shape.back() *
              (vp != op.words.end() && vp->second == "true" ? st0.tp : 1);
    }
  os << fmt::format(
      "  spec.vocab = {};\n  spec.modelFlopsPerSample = {};\n  spec.zeroOptimizer = {};\n"
      "  spec.zeroGrads = {};\n",
      vocab, src.modelFlopsPerSample, st0.zero.optimizer ? "true" : "false",
      st0.zero.grads ? "true" : "false");
  os << fmt::format(
      "  spec.tokensBuffer = {};\n  spec.targetsBuffer = {};\n  spec.lossBuffer = {};\n",
      st.moduleInputs[0], st.moduleInputs[1], post.outputs.at(0));
  os << fmt::format(
      "  spec.preOut = {};\n  spec.layerIn = {};\n  spec.layerOut = {};\n  spec.postIn = {};\n",
      pre.outputs.at(0), layer.inputs.at(0), layer.outputs.at(0), post.inputs.at(0));
  os << fmt::format("  spec.postGradIn = {};\n  spec.postGradOut = {};\n  spec.layerGradIn = {};\n"
                    "  spec.layerGradOut = {};\n  spec.preGradIn = {};\n",
                    post.gradInputs.at(0), post.gradOutputs.at(0), layer.gradInputs.at(0),
                    layer.gradOutputs.at(0), pre.gradInputs.at(0));
  os << "  spec.preForward = preForward;\n  spec.layerForward = layerForward;\n  spec.postForward "
        "= postForward;\n";
  os << "  spec.postBackward = postBackward;\n  spec.layerBackward = layerBackward;\n  "
        "spec.preBackward = preBackward;\n";
  os << fmt::format(
      "  spec.lr = float({});\n  spec.beta1 = float({});\n  spec.beta2 = float({});\n"
      "  spec.eps = float({});\n  spec.weightDecay = float({});\n  spec.gradClip = float({});\n"
      "  spec.warmupSteps = {};\n",
      t.lr, t.beta1, t.beta2, t.eps, t.weightDecay, t.gradClip, t.warmupSteps);
  os << "  return runTrainer(spec, argc, argv);\n}\n";
  return true;
}
