//===- ScratchPlanner.cpp - One arena for a stage's transient buffers -----===//
#include "backend/trainer/ScratchPlanner.h"

#include "backend/trainer/FusedOps.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace mist {

namespace {

constexpr int64_t alignment = 256;

struct Interval {
  int first, last;
};

/// The live interval of every scratch buffer one region run uses.
std::map<int, Interval> liveness(const std::vector<LoweredOp> &ops, const std::vector<int> &inputs,
                                 const std::vector<int> &outputs,
                                 const std::vector<bool> &scratch) {
  std::map<int, Interval> live;
  auto touch = [&](int b, int at) {
    if (b < 0 || size_t(b) >= scratch.size() || !scratch[size_t(b)])
      return;
    auto [it, fresh] = live.try_emplace(b, Interval{at, at});
    if (!fresh) {
      it->second.first = std::min(it->second.first, at);
      it->second.last = std::max(it->second.last, at);
    }
  };
  const int end = int(ops.size());
  for (int b : inputs)
    touch(b, -1);
  // A fused pair (FusedOps.h) is one op: what either touches is live at both.
  const std::vector<bool> fused = fusedWithNext(ops, outputs);
  for (int i = 0; i < end; ++i) {
    const int pairStart = i > 0 && fused[size_t(i - 1)] ? i - 1 : i;
    const int pairEnd = fused[size_t(i)] ? i + 1 : i;
    for (int at : {pairStart, pairEnd}) {
      for (int b : ops[size_t(i)].operands)
        touch(b, at);
      for (int b : ops[size_t(i)].results)
        touch(b, at);
    }
  }
  for (int b : outputs)
    touch(b, end);
  return live;
}

} // namespace

ScratchPlan planScratch(const LoweredStage &stage, const std::vector<bool> &scratch, bool first,
                        bool last) {
  const size_t n = stage.buffers.size();
  ScratchPlan plan;
  plan.offset.assign(n, -1);
  plan.run.assign(n, -1);
  // conflicts[a] holds b when a and b are live at once in some run.
  std::vector<std::vector<int>> conflicts(n);
  std::vector<int> owner(n, -1); // the run kind using a buffer; -2: more than one
  for (int r = 0; r < 3; ++r) {
    if ((r == 0 && !first) || (r == 2 && !last))
      continue;
    const LoweredRegion &region = stage.regions[r];
    for (bool forward : {true, false}) {
      std::map<int, Interval> live =
          forward ? liveness(region.forward, region.inputs, region.outputs, scratch)
                  : liveness(region.backward, region.gradInputs, region.gradOutputs, scratch);
      const int kind = 2 * r + (forward ? 0 : 1);
      for (auto a = live.begin(); a != live.end(); ++a) {
        int &o = owner[size_t(a->first)];
        o = o == -1 || o == kind ? kind : -2;
        for (auto b = std::next(a); b != live.end(); ++b)
          if (a->second.first <= b->second.last && b->second.first <= a->second.last) {
            conflicts[size_t(a->first)].push_back(b->first);
            conflicts[size_t(b->first)].push_back(a->first);
          }
      }
    }
  }
  auto bytesOf = [&](int b) {
    const int64_t raw =
        stage.buffers[size_t(b)].elements() * dtypeBytes(stage.buffers[size_t(b)].dtype);
    return (raw + alignment - 1) / alignment * alignment;
  };
  // Largest first, each at the lowest offset of its run's arena clear of its
  // placed conflicts (which are in the same run by construction).
  std::vector<int> order;
  for (size_t b = 0; b < n; ++b)
    if (owner[b] >= 0)
      order.push_back(int(b));
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return bytesOf(a) > bytesOf(b); });
  for (int b : order) {
    std::vector<std::pair<int64_t, int64_t>> taken; // [begin, end) of placed conflicts
    for (int c : conflicts[size_t(b)])
      if (plan.offset[size_t(c)] >= 0)
        taken.push_back({plan.offset[size_t(c)], plan.offset[size_t(c)] + bytesOf(c)});
    std::sort(taken.begin(), taken.end());
    int64_t at = 0;
    for (auto [begin, end] : taken) {
      if (at + bytesOf(b) <= begin)
        break;
      at = std::max(at, end);
    }
    const int r = owner[size_t(b)];
    plan.offset[size_t(b)] = at;
    plan.run[size_t(b)] = r;
    plan.bytes[size_t(r)] = std::max(plan.bytes[size_t(r)], at + bytesOf(b));
  }
  return plan;
}

} // namespace mist
