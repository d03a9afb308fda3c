//===- OpSetup.cpp - From a shapes-file entry to the call to time ----------===//
#include "tools/profiler/OpSetup.h"

#include <functional>
#include <numeric>

namespace mist::profiler {

void need(bool ok, const std::string &what) {
  if (!ok)
    throw NotTimed{what};
}

int64_t elements(const std::vector<int64_t> &dims) {
  return std::accumulate(dims.begin(), dims.end(), int64_t(1), std::multiplies<int64_t>());
}

void OpSetup::operands(size_t lo, size_t hi) const {
  need(ops.size() >= lo && ops.size() <= hi, "expected " + std::to_string(lo) +
                                                 (lo == hi ? "" : " to " + std::to_string(hi)) +
                                                 " operands, found " + std::to_string(ops.size()));
}

int64_t OpSetup::last(size_t i) const {
  need(i < ops.size() && !ops[i].empty() && ops[i].back() > 0,
       "operand " + std::to_string(i) + " has no last dimension");
  return ops[i].back();
}

int64_t OpSetup::sizeAttr(const std::string &key, bool required) const {
  const double v = e.number(key, 0);
  if (v == 0 && !required)
    return 0;
  need(v >= 1 && v <= double(1 << 24) && v == static_cast<double>(static_cast<int64_t>(v)),
       "needs the " + key + " attribute, a whole number from 1 to 2^24");
  return static_cast<int64_t>(v);
}

std::function<void()> OpSetup::build() {
  const std::string &op = e.op;
#define MIST_NOT_PROFILED(name, why)                                                               \
  if (op == name)                                                                                  \
    throw NotTimed{why};
#include "ir/OpCalls.def"
  if (op == "linear" || op == "lm_head")
    return gemm(op == "lm_head");
  if (op == "linear_grad" || op == "lm_head_grad")
    return gemmGrad(op == "lm_head_grad");
  if (op == "attention" || op == "attention_grad")
    return attention(op == "attention_grad");
  if (op == "layernorm" || op == "layernorm_grad")
    return layerNorm(op == "layernorm_grad");
  if (op == "rmsnorm" || op == "rmsnorm_grad")
    return rmsNorm(op == "rmsnorm_grad");
  if (op == "rope" || op == "rope_grad")
    return rope(op == "rope_grad");
  if (op == "gelu" || op == "silu" || op == "mul" || op == "add" || op == "grad_add" ||
      op == "gelu_grad" || op == "silu_grad" || op == "mul_grad")
    return elementwise(op);
  if (op == "embedding" || op == "embedding_grad")
    return embedding(op == "embedding_grad");
  if (op == "position_embedding_grad")
    return positionEmbeddingGrad();
  if ((op == "cross_entropy" || op == "cross_entropy_grad") && e.word("fused", "true") == "false")
    throw NotTimed{"the unfused loss (fused = false) has no kernel here: priced by its bytes"};
  if (op == "cross_entropy" || op == "cross_entropy_grad")
    return crossEntropy(op == "cross_entropy_grad");
  throw NotTimed{"no kernel for this op"};
}

} // namespace mist::profiler
