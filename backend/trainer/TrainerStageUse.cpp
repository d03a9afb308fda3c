//===- TrainerStageUse.cpp - What one stage of a plan runs ----------------===//
#include "backend/trainer/TrainerStageUse.h"

#include "ir/OpSemantics.h"

#include <algorithm>

using namespace mist;

StageUse mist::stageUse(const LoweredStage &st, bool first, bool last) {
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

std::vector<StageParam> mist::stageParams(const LoweredStage &st, const StageUse &use) {
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

bool mist::isParameterBuffer(const std::vector<StageParam> &params, int b) {
  return std::any_of(params.begin(), params.end(), [&](const StageParam &p) {
    return p.buffer == b || std::find(p.grads.begin(), p.grads.end(), int64_t(b)) != p.grads.end();
  });
}

std::set<int> mist::recomputedByCheckpoint(const LoweredStage &st,
                                           const std::set<int> &layerSaved) {
  const LoweredRegion &layer = st.region(RegionKind::Layer);
  std::set<int> out;
  for (int b : layerSaved)
    if (st.buffers[size_t(b)].dtype != DType::I32 &&
        std::find(layer.inputs.begin(), layer.inputs.end(), b) == layer.inputs.end() &&
        std::find(layer.outputs.begin(), layer.outputs.end(), b) == layer.outputs.end())
      out.insert(b);
  return out;
}

std::vector<int> mist::selectivelyRecomputed(const LoweredStage &st,
                                             const std::set<int> &recomputed) {
  std::vector<int> out;
  for (const LoweredOp &op : st.region(RegionKind::Layer).forward)
    if (recomputedSelectively(op.kind) && !op.results.empty() && recomputed.count(op.results[0]))
      out.push_back(op.results[0]);
  return out;
}

bool mist::reads(const LoweredRegion &region, int b) {
  for (const auto *ops : {&region.forward, &region.backward})
    for (const LoweredOp &op : *ops)
      for (int o : op.operands)
        if (o == b)
          return true;
  return false;
}

ParamKind mist::paramKindOf(const LoweredStage &st, int b) {
  for (const LoweredRegion &region : st.regions)
    for (const LoweredOp &op : region.forward)
      for (size_t i = 0; i < op.operands.size(); ++i) {
        if (op.operands[i] != b)
          continue;
        switch (op.kind) {
        case OpKind::Linear: // x, weight, bias
          return i == 2 ? ParamKind::Bias : ParamKind::Weight;
        case OpKind::LayerNorm:
        case OpKind::RMSNorm:
          return ParamKind::Norm;
        case OpKind::Embedding:
        case OpKind::PositionEmbedding:
          return ParamKind::Embedding;
        case OpKind::LMHead: {
          auto tied = op.words.find("tied");
          return tied != op.words.end() && tied->second == "true" ? ParamKind::Embedding
                                                                  : ParamKind::Weight;
        }
        default:
          return ParamKind::Weight;
        }
      }
  return ParamKind::Weight;
}
