//===- FusedOps.cpp - Which consecutive ops the trainer runs as one -------===//
#include "backend/trainer/FusedOps.h"

#include "ir/OpSemantics.h"
#include <algorithm>
#include <map>

using namespace mist;

namespace {

bool tanhGelu(const LoweredOp &op) {
  auto it = op.words.find("approximate");
  return it == op.words.end() || it->second == "true";
}

bool rowParallel(const LoweredOp &op) {
  auto it = op.words.find("shard");
  return it != op.words.end() && it->second == "row";
}

} // namespace

std::vector<bool> mist::fusedWithNext(const std::vector<LoweredOp> &ops,
                                      const std::vector<int> &outputs) {
  std::map<int, int> readers;
  for (const LoweredOp &op : ops)
    for (int b : op.operands)
      ++readers[b];
  auto yielded = [&](int b) {
    return std::find(outputs.begin(), outputs.end(), b) != outputs.end();
  };
  std::vector<bool> fused(ops.size(), false);
  for (size_t i = 0; i + 1 < ops.size(); ++i) {
    const LoweredOp &a = ops[i], &b = ops[i + 1];
    if (a.results.empty() || b.operands.empty() || b.operands[0] != a.results[0])
      continue;
    if (fusesWithNext(a.kind, b.kind, rowParallel(a), tanhGelu(b),
                      readers[a.results[0]] == 1 && !yielded(a.results[0]))) {
      fused[i] = true;
      ++i; // a pair is not the start of another
    }
  }
  return fused;
}
