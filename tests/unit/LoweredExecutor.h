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
#include <optional>
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

  /// Runs `op` with the CPU ops: ir/OpCalls.def's vocabulary as values.
  void exec(const LoweredOp &op, Frame &f) {
    using rt::ops::AttentionShape;
    auto shape = [&](int i) { return st.buffers[i].shape; };
    auto in = [&](size_t k) { return f[op.operands.at(k)].data(); };
    auto res = [&](size_t k) { return f[op.results.at(k)].data(); };
    auto flag = [&](const char *key, bool dflt) {
      auto it = op.words.find(key);
      return it == op.words.end() ? dflt : it->second == "true";
    };
    auto number = [&](const char *key, double dflt) {
      auto it = op.numbers.find(key);
      return it == op.numbers.end() ? dflt : it->second;
    };
    auto rowParallel = [&] {
      auto it = op.words.find("shard");
      return it != op.words.end() && it->second == "row";
    };
    std::optional<AttentionGeometry> geometry;
    auto g = [&]() -> const AttentionGeometry & {
      if (!geometry)
        geometry = attentionGeometry(st, op);
      return *geometry;
    };
    auto attIn = [&](int which) {
      float *q = in(g().firstInput);
      return which == 0  ? q
             : g().fused ? q + (which == 1 ? g().kOffset : g().vOffset)
                         : in(g().firstInput + size_t(which));
    };
    auto attGrad = [&](int which) {
      float *dq = res(0);
      return which == 0  ? dq
             : g().fused ? dq + (which == 1 ? g().kOffset : g().vOffset)
                         : res(size_t(which));
    };
#define O(k) op.operands.at(k)
#define R(k) op.results.at(k)
#define IN(k) in(k)
#define RES(k) res(k)
#define IDS(k) ids(op.operands.at(k))
#define OPT_IN(key, k) (flag(key, false) ? in(k) : nullptr)
#define OPT_RES(key, k) (flag(key, false) ? res(k) : nullptr)
#define IN_PICK(key, k, j) in(flag(key, false) ? k : j)
#define ROW_PARALLEL_BIAS(k)                                                                       \
  (flag("bias", false) && (!rowParallel() || tp.rank() == 0) ? in(k) : nullptr)
#define DIM(b, i) shape(b).at(i)
#define LAST(b) shape(b).back()
#define ELEMS(b) st.buffers[b].elements()
#define ROWS(b) (ELEMS(b) / LAST(b))
#define SIZE_ATTR(key, dflt) int64_t(number(key, double(dflt)))
#define N(size) int64_t(size)
#define TP_OFFSET(size) (tp.rank() * int64_t(size))
#define FIRST_TOKEN(b) (flag("sequence_split", false) ? tp.rank() * ROWS(b) : int64_t(0))
#define F32(key, dflt) float(number(key, dflt))
#define FLAG(key, dflt) flag(key, dflt)
#define NAMED_FLAG(argName, key) flag(key, false)
#define ATT_Q attIn(0)
#define ATT_K attIn(1)
#define ATT_V attIn(2)
#define ATT_DQ attGrad(0)
#define ATT_DK attGrad(1)
#define ATT_DV attGrad(2)
#define ATT_OUT in(g().outOperand)
#define ATT_LSE in(g().outOperand + 1)
#define ATT_Q_STRIDE g().qStride
#define ATT_KV_STRIDE g().kvStride
#define ATT_SHAPE                                                                                  \
  AttentionShape { g().batch, g().seq, g().heads, g().kvHeads, g().headDim, flag("causal", false) }
#define MIST_OP_CALL(Kind, fn, ...)                                                                \
  if (op.kind == OpKind::Kind) {                                                                   \
    rt::ops::fn(__VA_ARGS__);                                                                      \
    return;                                                                                        \
  }
#define MIST_OP_CALL_IF(Kind, cond, fn, ...)                                                       \
  if (op.kind == OpKind::Kind && (cond)) {                                                         \
    rt::ops::fn(__VA_ARGS__);                                                                      \
    return;                                                                                        \
  }
#define MIST_TP_CALL(Kind, fn, ...)                                                                \
  if (op.kind == OpKind::Kind) {                                                                   \
    tp.fn(__VA_ARGS__);                                                                            \
    return;                                                                                        \
  }
#include "ir/OpCalls.def"
// The vocabulary ends with the table.
#include "ir/OpCallVocabularyEnd.h"
    throw std::runtime_error(std::string("no CPU op for ") + opName(op.kind).str());
  }

  const LoweredStage &st;
  int layers;
  std::set<size_t> layerOwned;
  Frame global;
  std::vector<Frame> frames;
  std::map<int, std::vector<int32_t>> ints;
  rt::TpContext tp{nullptr}; ///< one rank: all-reduces copy, the loss is local
};

} // namespace mist::test
