//===- LoweredExecutor.h - Runs a lowered module on one CPU rank ----------===//
/// \file
/// A test harness: executes a LoweredStage at tp = 1 on one rank (pre, every
/// layer, post, then the backward in reverse) with the runtime's CPU ops, so
/// tests can check the lowering and the ops end to end against finite
/// differences. The trainer will run the same calls from generated code.
//===----------------------------------------------------------------------===//
#pragma once

#include "backend/trainer/Lowering.h"
#include "runtime/ops/Ops.h"
#include "runtime/trainer/TpContext.h"
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace mist::test {

class LoweredExecutor {
public:
  using Frame = std::vector<std::vector<float>>;

  LoweredExecutor(const LoweredStage &st, int layers, uint32_t seed) : st(st), layers(layers) {
    for (int i : regionBuffers(st.region(RegionKind::Layer)))
      layerOwned.insert(i);
    global = makeFrame();
    frames.assign(layers, makeFrame());
    // Parameters: small random matrices, norms at one, biases at zero.
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.f, 0.2f);
    auto init = [&](Frame &f, int i) {
      const LoweredBuffer &b = st.buffers[i];
      bool norm =
          b.name.find("norm") != std::string::npos || b.name.find("ln") != std::string::npos;
      bool bias = b.name.size() > 5 && b.name.compare(b.name.size() - 5, 5, ".bias") == 0;
      for (float &v : f[i])
        v = bias ? 0.f : norm ? 1.f + 0.1f * normal(rng) : normal(rng);
    };
    for (size_t i = 0; i < st.buffers.size(); ++i) {
      if (st.buffers[i].role != Role::Param)
        continue;
      if (layerOwned.count(i))
        for (Frame &f : frames)
          init(f, static_cast<int>(i));
      else
        init(global, static_cast<int>(i));
    }
  }

  /// Token ids and targets for the module inputs (tokens, targets).
  void setInputs(const std::vector<int32_t> &tokens, const std::vector<int32_t> &targets) {
    ints[st.moduleInputs.at(0)] = tokens;
    ints[st.moduleInputs.at(1)] = targets;
  }

  float forward() {
    const LoweredRegion &pre = st.region(RegionKind::Pre), &layer = st.region(RegionKind::Layer),
                        &post = st.region(RegionKind::Post);
    run(pre.forward, global);
    std::vector<float> x = global[pre.outputs.at(0)];
    for (int l = 0; l < layers; ++l) {
      frames[l][layer.inputs.at(0)] = x;
      run(layer.forward, frames[l]);
      x = frames[l][layer.outputs.at(0)];
    }
    global[post.inputs.at(0)] = x;
    run(post.forward, global);
    return global[post.outputs.at(0)].at(0);
  }

  void backward() {
    const LoweredRegion &pre = st.region(RegionKind::Pre), &layer = st.region(RegionKind::Layer),
                        &post = st.region(RegionKind::Post);
    zeroGrads(global);
    for (Frame &f : frames)
      zeroGrads(f);
    global[post.gradInputs.at(0)].assign(1, 1.f);
    run(post.backward, global);
    std::vector<float> dx = global[post.gradOutputs.at(0)];
    for (int l = layers - 1; l >= 0; --l) {
      frames[l][layer.gradInputs.at(0)] = dx;
      run(layer.backward, frames[l]);
      dx = frames[l][layer.gradOutputs.at(0)];
    }
    global[pre.gradInputs.at(0)] = dx;
    run(pre.backward, global);
  }

  /// The parameter `name` (of layer `layer` for layer parameters).
  std::vector<float> &param(const std::string &name, int layer = 0) {
    int i = indexOf(name);
    return layerOwned.count(i) ? frames.at(layer)[i] : global[i];
  }
  /// d loss / d parameter: the sum of its gradient buffers (a tied weight has two).
  std::vector<float> grad(const std::string &name, int layer = 0) {
    std::vector<float> g(param(name, layer).size(), 0.f);
    for (size_t i = 0; i < st.buffers.size(); ++i) {
      const std::string &n = st.buffers[i].name;
      if (st.buffers[i].role != Role::Grad ||
          (n != name + ".grad" && n.rfind(name + ".grad.", 0) != 0))
        continue;
      const std::vector<float> &src = layerOwned.count(i) ? frames.at(layer)[i] : global[i];
      for (size_t e = 0; e < g.size(); ++e)
        g[e] += src.at(e);
    }
    return g;
  }

private:
  static std::set<int> regionBuffers(const LoweredRegion &r) {
    std::set<int> s(r.inputs.begin(), r.inputs.end());
    for (const auto *ops : {&r.forward, &r.backward})
      for (const LoweredOp &op : *ops) {
        s.insert(op.operands.begin(), op.operands.end());
        s.insert(op.results.begin(), op.results.end());
      }
    s.insert(r.gradInputs.begin(), r.gradInputs.end());
    return s;
  }
  Frame makeFrame() const {
    Frame f;
    for (const LoweredBuffer &b : st.buffers)
      f.emplace_back(static_cast<size_t>(std::max<int64_t>(b.elements(), 1)), 0.f);
    return f;
  }
  void zeroGrads(Frame &f) const {
    for (size_t i = 0; i < st.buffers.size(); ++i)
      if (st.buffers[i].role == Role::Grad)
        std::fill(f[i].begin(), f[i].end(), 0.f);
  }
  int indexOf(const std::string &name) const {
    for (size_t i = 0; i < st.buffers.size(); ++i)
      if (st.buffers[i].name == name)
        return static_cast<int>(i);
    throw std::runtime_error("no buffer " + name);
  }
  const int32_t *ids(int i) const { return ints.at(i).data(); }

  void run(const std::vector<LoweredOp> &ops, Frame &f) {
    for (const LoweredOp &op : ops)
      exec(op, f);
  }

  void exec(const LoweredOp &op, Frame &f) {
    using namespace rt::ops;
    auto buf = [&](int i) { return f[i].data(); };
    auto in = [&](size_t k) { return f[op.operands.at(k)].data(); };
    auto outp = [&](size_t k) { return f[op.results.at(k)].data(); };
    auto shape = [&](int i) { return st.buffers[i].shape; };
    auto n = [&](int i) { return st.buffers[i].elements(); };
    auto num = [&](const char *k) { return op.numbers.at(k); };
    auto flag = [&](const char *k) {
      auto it = op.words.find(k);
      return it != op.words.end() && it->second == "true";
    };
    const int o0 = op.operands.empty() ? -1 : op.operands[0],
              r0 = op.results.empty() ? -1 : op.results[0];
    (void)buf;
    switch (op.kind) {
    case OpKind::Embedding: {
      auto t = shape(op.operands[1]);
      embedding(outp(0), ids(o0), in(1), n(o0), t[1], t[0], 0);
      break;
    }
    case OpKind::EmbeddingGrad: {
      auto t = shape(r0);
      embeddingGrad(outp(0), in(0), ids(op.operands[1]), n(op.operands[1]), t[1], t[0], 0);
      break;
    }
    case OpKind::PositionEmbedding: {
      auto s = shape(r0);
      positionEmbedding(outp(0), in(0), s[0], s[1], s[2]);
      break;
    }
    case OpKind::PositionEmbeddingGrad: {
      auto s = shape(o0);
      positionEmbeddingGrad(outp(0), in(0), s[0], s[1], s[2]);
      break;
    }
    case OpKind::Add:
    case OpKind::GradAdd:
      add(outp(0), in(0), in(1), n(r0));
      break;
    case OpKind::TpCopy:
    case OpKind::AllReduce:
    case OpKind::Dropout:
    case OpKind::DropoutGrad:
      copy(outp(0), in(0), n(r0));
      break;
    case OpKind::LayerNorm: {
      int64_t c = shape(o0).back();
      layerNorm(outp(0), outp(1), in(0), in(1), flag("bias") ? in(2) : nullptr, n(o0) / c, c,
                float(num("eps")));
      break;
    }
    case OpKind::LayerNormGrad: {
      int64_t c = shape(o0).back();
      bool b = flag("bias");
      layerNormGrad(outp(0), outp(1), b ? outp(2) : nullptr, in(0), in(1), in(2), in(b ? 4 : 3),
                    n(o0) / c, c);
      break;
    }
    case OpKind::RMSNorm: {
      int64_t c = shape(o0).back();
      rmsNorm(outp(0), outp(1), in(0), in(1), n(o0) / c, c, float(num("eps")));
      break;
    }
    case OpKind::RMSNormGrad: {
      int64_t c = shape(o0).back();
      rmsNormGrad(outp(0), outp(1), in(0), in(1), in(2), in(3), n(o0) / c, c);
      break;
    }
    case OpKind::Linear: {
      auto w = shape(op.operands[1]);
      linear(outp(0), in(0), in(1), flag("bias") ? in(2) : nullptr, n(o0) / w[0], w[0], w[1]);
      break;
    }
    case OpKind::LinearGrad: {
      auto w = shape(op.operands[2]);
      linearGrad(outp(0), outp(1), flag("bias") ? outp(2) : nullptr, in(0), in(1), in(2),
                 n(op.operands[1]) / w[0], w[0], w[1]);
      break;
    }
    case OpKind::LMHead: {
      auto t = shape(op.operands[1]);
      lmHead(outp(0), in(0), in(1), n(o0) / t[1], t[1], t[0]);
      break;
    }
    case OpKind::LMHeadGrad: {
      auto t = shape(op.operands[2]);
      lmHeadGrad(outp(0), outp(1), in(0), in(1), in(2), n(op.operands[1]) / t[1], t[1], t[0]);
      break;
    }
    case OpKind::Attention:
    case OpKind::AttentionGrad: {
      AttentionGeometry g = attentionGeometry(st, op);
      const float *q = in(g.firstInput);
      const float *k = g.fused ? q + g.kOffset : in(g.firstInput + 1);
      const float *v = g.fused ? q + g.vOffset : in(g.firstInput + 2);
      AttentionShape s{g.batch, g.seq, g.heads, g.kvHeads, g.headDim, flag("causal")};
      if (op.kind == OpKind::Attention) {
        attention(outp(0), outp(1), q, k, v, g.qStride, g.kvStride, s);
      } else {
        float *dq = outp(0), *dk = g.fused ? dq + g.kOffset : outp(1),
              *dv = g.fused ? dq + g.vOffset : outp(2);
        attentionGrad(dq, dk, dv, in(0), q, k, v, in(g.outOperand), in(g.outOperand + 1), g.qStride,
                      g.kvStride, s);
      }
      break;
    }
    case OpKind::Rope:
    case OpKind::RopeGrad: {
      auto s = shape(o0);
      int64_t hd = static_cast<int64_t>(num("head_dim"));
      auto theta = op.numbers.count("theta") ? float(num("theta")) : 10000.f;
      int64_t rotary = op.numbers.count("rotary_dim") ? int64_t(num("rotary_dim")) : hd;
      if (op.kind == OpKind::Rope)
        rope(outp(0), in(0), s[0], s[1], s[2] / hd, hd, theta, rotary);
      else
        ropeGrad(outp(0), in(0), s[0], s[1], s[2] / hd, hd, theta, rotary);
      break;
    }
    case OpKind::Gelu:
    case OpKind::GeluGrad: {
      const bool exact = op.words.count("approximate") && op.words.at("approximate") == "false";
      if (op.kind == OpKind::Gelu)
        (exact ? geluExact : gelu)(outp(0), in(0), n(r0));
      else
        (exact ? geluExactGrad : geluGrad)(outp(0), in(0), in(1), n(r0));
      break;
    }
    case OpKind::Silu:
      silu(outp(0), in(0), n(r0));
      break;
    case OpKind::SiluGrad:
      siluGrad(outp(0), in(0), in(1), n(r0));
      break;
    case OpKind::Mul:
      mul(outp(0), in(0), in(1), n(r0));
      break;
    // slice and concat as plain loops (this executor checks the runtime's
    // copies rather than calling them); tp = 1, so no rank's part to take.
    case OpKind::Slice:
    case OpKind::SliceGrad: {
      const bool grad = op.kind == OpKind::SliceGrad;
      const int x = grad ? r0 : o0, part = grad ? o0 : r0;
      const int64_t width = shape(x).back(), size = shape(part).back(), rows = n(x) / width,
                    start = int64_t(num("start"));
      float *dst = outp(0);
      const float *src = in(0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < (grad ? width : size); ++j)
          if (grad)
            dst[r * width + j] = j >= start && j < start + size ? src[r * size + j - start] : 0.f;
          else
            dst[r * size + j] = src[r * width + start + j];
      break;
    }
    case OpKind::Concat:
    case OpKind::ConcatGrad: {
      const bool grad = op.kind == OpKind::ConcatGrad;
      const std::vector<int> &parts = grad ? op.results : op.operands;
      const int64_t wa = shape(parts[0]).back(), wb = shape(parts[1]).back(),
                    rows = n(parts[0]) / wa;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < wa + wb; ++j) {
          float *whole = grad ? nullptr : outp(0);
          if (grad)
            (j < wa ? outp(0)[r * wa + j] : outp(1)[r * wb + j - wa]) = in(0)[r * (wa + wb) + j];
          else
            whole[r * (wa + wb) + j] = j < wa ? in(0)[r * wa + j] : in(1)[r * wb + j - wa];
        }
      break;
    }
    case OpKind::MulGrad:
      mulGrad(outp(0), outp(1), in(0), in(1), in(2), n(r0));
      break;
    case OpKind::CrossEntropy: {
      int64_t vocab = shape(o0).back();
      rt::TpContext(nullptr).crossEntropy(outp(0), outp(1), in(0), ids(op.operands[1]),
                                          n(o0) / vocab, vocab, false);
      break;
    }
    case OpKind::CrossEntropyGrad: {
      int64_t vocab = shape(op.operands[1]).back();
      rt::TpContext(nullptr).crossEntropyGrad(outp(0), in(0), in(1), ids(op.operands[2]), in(3),
                                              n(op.operands[1]) / vocab, vocab, false);
      break;
    }
    default:
      throw std::runtime_error(std::string("no CPU op for ") + opName(op.kind).str());
    }
  }

  const LoweredStage &st;
  int layers;
  std::set<size_t> layerOwned;
  Frame global;
  std::vector<Frame> frames;
  std::map<int, std::vector<int32_t>> ints;
};

} // namespace mist::test
