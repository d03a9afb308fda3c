//===- ProfileShapes.cpp - What a profiler must measure for a model -------===//
#include "backend/reports/ProfileShapes.h"

#include "backend/trainer/Lowering.h"
#include <cmath>
#include <fmt/format.h>
#include <map>

using namespace mist;

namespace {

/// The shape key of a lowered op, spelled as measuredShapeKey spells it.
std::string loweredKey(const LoweredStage &st, const LoweredOp &op) {
  std::string key;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    key += i ? "," : "";
    const std::vector<int64_t> &shape = st.buffers[op.operands[i]].shape;
    for (size_t j = 0; j < shape.size(); ++j)
      key += (j ? "x" : "") + std::to_string(shape[j]);
  }
  return key;
}

std::string number(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::abs(v) < 1e15)
    return std::to_string(static_cast<long long>(v));
  return fmt::format("{:g}", v);
}

/// The attribute column of a lowered op: its attributes in key order, with
/// this rank's head counts for attention and rope.
std::string attributes(const LoweredStage &st, const LoweredOp &op) {
  std::map<std::string, std::string> attrs;
  for (const auto &[k, v] : op.numbers)
    attrs[k] = number(v);
  for (const auto &[k, v] : op.words)
    attrs[k] = v;
  if (op.kind == OpKind::Attention || op.kind == OpKind::AttentionGrad) {
    AttentionGeometry g = attentionGeometry(st, op);
    attrs["heads"] = std::to_string(g.heads);
    attrs["kv_heads"] = std::to_string(g.kvHeads);
  } else if ((op.kind == OpKind::Rope || op.kind == OpKind::RopeGrad) && !op.operands.empty()) {
    auto hd = op.numbers.find("head_dim");
    const std::vector<int64_t> &x = st.buffers[op.operands[0]].shape;
    if (hd != op.numbers.end() && hd->second > 0 && !x.empty())
      attrs["heads"] = std::to_string(x.back() / static_cast<int64_t>(hd->second));
  }
  std::string text;
  for (const auto &[k, v] : attrs)
    text += (text.empty() ? "" : ",") + k + "=" + v;
  return text.empty() ? "-" : text;
}

} // namespace

std::optional<std::vector<ProfileShape>>
mist::collectProfileShapes(const Module &m, const ModelProfile &model,
                           const std::vector<std::pair<int, int>> &stageShapes,
                           DiagnosticEngine &diag) {
  std::map<std::pair<std::string, std::string>, std::string> found; // (op, shape) -> attrs
  for (auto [b, tp] : stageShapes) {
    auto lowered = lowerForStage(m, b, tp, diag);
    if (!lowered)
      return std::nullopt;
    std::map<std::pair<std::string, std::string>, std::string> attrsOf;
    for (const LoweredRegion &r : lowered->regions)
      for (const std::vector<LoweredOp> *ops : {&r.forward, &r.backward})
        for (const LoweredOp &op : *ops)
          attrsOf.emplace(std::pair{opName(op.kind).str(), loweredKey(*lowered, op)},
                          attributes(*lowered, op));
    for (auto &lookup : model.measuredLookups(b, tp)) {
      if (found.count(lookup))
        continue;
      auto it = attrsOf.find(lookup);
      if (it == attrsOf.end()) {
        // The lowering and the performance model read the same IR; a key
        // of one that the other lacks is a bug.
        diag.error({}, fmt::format("profile-shapes: no lowered op for {} at {} (b = {}, tp = {})",
                                   lookup.first, lookup.second, b, tp));
        return std::nullopt;
      }
      found.emplace(lookup, it->second);
    }
  }
  std::vector<ProfileShape> shapes;
  for (const auto &[key, attrs] : found)
    shapes.push_back({key.first, key.second, attrs});
  return shapes;
}

void mist::writeProfileShapes(const std::vector<ProfileShape> &shapes,
                              const std::vector<std::string> &comments, llvm::raw_ostream &os) {
  os << profileShapesHeader << "\n";
  for (const std::string &c : comments)
    os << "# " << c << "\n";
  os << "# op\tshape\tattributes\n";
  for (const ProfileShape &s : shapes)
    os << s.op << "\t" << s.shape << "\t" << s.attrs << "\n";
}
