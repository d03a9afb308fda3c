//===- PlanWriter.cpp - Write a training plan as YAML ---------------------===//
#include "yaml/PlanWriter.h"

#include "ir/Printer.h"
#include "llvm/ADT/StringExtras.h"

using namespace mist;

namespace {

/// Words a YAML 1.1 or 1.2 reader may take for something other than a
/// string when unquoted.
bool isReservedWord(llvm::StringRef s) {
  static const char *words[] = {"true", "false", "yes", "no", "on", "off", "null", "y", "n"};
  for (const char *w : words)
    if (s.equals_insensitive(w))
      return true;
  return false;
}

const char *boolText(bool b) { return b ? "true" : "false"; }

} // namespace

std::string mist::yamlQuote(const std::string &s) {
  bool plain = !s.empty() && (llvm::isAlpha(s[0]) || s[0] == '_') && !isReservedWord(s);
  for (char ch : s)
    plain &= llvm::isAlnum(ch) || ch == '_' || ch == '-' || ch == '.';
  if (plain)
    return s;
  std::string out = "\"";
  for (unsigned char ch : s) {
    switch (ch) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (ch < 0x20 || ch == 0x7f) {
        out += "\\x";
        out += llvm::hexdigit(ch >> 4, /*LowerCase=*/true);
        out += llvm::hexdigit(ch & 15, /*LowerCase=*/true);
      } else {
        out += static_cast<char>(ch);
      }
    }
  }
  return out + "\"";
}

void mist::writePlan(const Plan &plan, llvm::raw_ostream &os) {
  os << "mist_plan: " << plan.version << "\n";
  if (!plan.model.empty())
    os << "model: " << yamlQuote(plan.model) << "\n";
  if (plan.seqLen > 0)
    os << "seq_len: " << plan.seqLen << "\n";
  if (!plan.dtype.empty())
    os << "dtype: " << plan.dtype << "\n";
  if (!plan.cluster.empty())
    os << "cluster: " << yamlQuote(plan.cluster) << "\n";
  os << "global_batch: " << plan.globalBatch << "\n";
  os << "grad_accum: " << plan.gradAccum << "\n";
  if (plan.virtualStages > 1)
    os << "virtual_stages: " << plan.virtualStages << "\n";
  if (plan.sequenceParallel)
    os << "sequence_parallel: true\n";
  if (plan.tpCommOverlap)
    os << "tp_comm_overlap: true\n";
  if (plan.selectiveRecompute)
    os << "selective_recompute: true\n";
  if (!plan.overlapGradReduce)
    os << "overlap_grad_reduce: false\n";
  os << "stages:\n";
  for (const StagePlan &s : plan.stages) {
    os << "  - layers: [" << s.firstLayer << ", " << s.lastLayer << "]\n";
    os << "    mesh: {nodes: " << s.meshNodes << ", gpus_per_node: " << s.meshGpusPerNode << "}\n";
    os << "    micro_batch: " << s.microBatch << "\n";
    os << "    dp: " << s.dp << "\n";
    os << "    tp: " << s.tp << "\n";
    os << "    zero: {weights: " << boolText(s.zero.weights)
       << ", grads: " << boolText(s.zero.grads) << ", optimizer: " << boolText(s.zero.optimizer)
       << "}\n";
    os << "    ckpt_layers: " << s.ckptLayers << "\n";
    os << "    offload: {weights: " << formatReal(s.offload.weights)
       << ", grads: " << formatReal(s.offload.grads)
       << ", optimizer: " << formatReal(s.offload.optimizer)
       << ", activations: " << formatReal(s.offload.activations) << "}\n";
  }
  if (plan.predicted) {
    const PlanPrediction &p = *plan.predicted;
    os << "predicted: {iteration_s: " << formatReal(p.iterationSeconds)
       << ", tokens_per_s: " << formatReal(p.tokensPerSecond) << ", peak_gib: [";
    for (size_t i = 0; i < p.peakGiB.size(); ++i)
      os << (i ? ", " : "") << formatReal(p.peakGiB[i]);
    os << "]}\n";
  }
}
