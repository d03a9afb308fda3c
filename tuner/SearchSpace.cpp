//===- SearchSpace.cpp - The knobs the tuner may turn ---------------------===//
#include "tuner/SearchSpace.h"

#include <algorithm>

using namespace mist;

std::optional<SpaceLevel> mist::parseSpaceLevel(llvm::StringRef s) {
  for (SpaceLevel l : {SpaceLevel::Megatron, SpaceLevel::Zero, SpaceLevel::Ckpt,
                       SpaceLevel::Offload, SpaceLevel::Full, SpaceLevel::DeepSpeed})
    if (s == spaceLevelName(l))
      return l;
  return std::nullopt;
}

const char *mist::spaceLevelName(SpaceLevel s) {
  switch (s) {
  case SpaceLevel::Megatron:
    return "megatron";
  case SpaceLevel::Zero:
    return "+zero";
  case SpaceLevel::Ckpt:
    return "+ckpt";
  case SpaceLevel::Offload:
    return "+offload";
  case SpaceLevel::Full:
    return "full";
  case SpaceLevel::DeepSpeed:
    return "deepspeed";
  }
  return "?";
}

std::vector<ZeroFlags> SearchSpace::zeroOptions(int dp) const {
  if (dp <= 1)
    return {ZeroFlags{}}; // sharding over one rank changes nothing
  if (!zeroLevels())
    return {ZeroFlags::ofLevel(1)}; // Megatron's distributed optimizer
  return {ZeroFlags::ofLevel(0), ZeroFlags::ofLevel(1), ZeroFlags::ofLevel(2),
          ZeroFlags::ofLevel(3)};
}

std::vector<OffloadRatios> SearchSpace::offloadOptions() const {
  if (level == SpaceLevel::DeepSpeed) {
    // None; ZeRO-Offload (optimizer state and gradients); with ZeRO-3's
    // parameter offload; each with the activation checkpoints offloaded.
    std::vector<OffloadRatios> out;
    for (double ao : {0.0, 1.0})
      for (const OffloadRatios &o :
           {OffloadRatios{0, 0, 0, ao}, OffloadRatios{0, 1, 1, ao}, OffloadRatios{1, 1, 1, ao}})
        out.push_back(o);
    return out;
  }
  if (!offload())
    return {OffloadRatios{}};
  std::vector<OffloadRatios> out;
  for (double wo : weightGradRatios)
    for (double go : weightGradRatios)
      for (double oo : optActRatios)
        for (double ao : optActRatios) {
          if (wo > 0 && go == 0)
            continue; // offloaded weights with resident grads never pays off (the seed's rule)
          out.push_back({wo, go, oo, ao});
        }
  return out;
}

bool SearchSpace::allows(const ZeroFlags &z, const OffloadRatios &o, int ckpt, int layers,
                         int stages) const {
  if (level != SpaceLevel::DeepSpeed)
    return true;
  if (stages > 1 && (z.grads || z.weights))
    return false; // DeepSpeed's pipeline engine runs with ZeRO-1 at most
  if (o.optimizer > 0 && !z.optimizer)
    return false; // ZeRO-Offload partitions the optimizer state first
  if (o.weights > 0 && !z.weights)
    return false; // parameter offload is ZeRO-3's
  if (o.activations > 0 && ckpt != layers)
    return false; // cpu_checkpointing offloads the recomputation checkpoints
  return true;
}

std::vector<int> SearchSpace::ckptOptions(int layers, bool recomputeAll) const {
  if (uniformCkpt())
    return {recomputeAll ? layers : 0};
  std::vector<int> out;
  if (layers + 1 <= maxCkptOptions) {
    for (int c = 0; c <= layers; ++c)
      out.push_back(c);
    return out;
  }
  // A stage of very many layers: counts evenly spaced from none to all, so
  // a stage's strategies (and the tuner's memory) stay bounded.
  for (int i = 0; i < maxCkptOptions; ++i) {
    int c = static_cast<int>(int64_t(layers) * i / (maxCkptOptions - 1));
    if (out.empty() || c != out.back())
      out.push_back(c);
  }
  return out;
}

std::vector<int> SearchSpace::layerOptions(int total, int stages) const {
  return layerOptionsForShare(total, stages, 1, stages);
}

std::vector<int> SearchSpace::layerOptionsForShare(int total, int stages, int gpus,
                                                   int totalGpus) const {
  if (stages == 1)
    return {total};
  int64_t share = int64_t(total) * gpus;
  int lo = static_cast<int>(share / totalGpus),
      hi = static_cast<int>((share + totalGpus - 1) / totalGpus);
  if (evenLayers() && lo != hi)
    return {}; // the stages cannot split the layers evenly
  if (level == SpaceLevel::Full) {
    lo -= layerSlack;
    hi += layerSlack;
  }
  lo = std::max(1, lo);
  hi = std::min(total - (stages - 1), hi);
  std::vector<int> out;
  for (int l = lo; l <= hi; ++l)
    out.push_back(l);
  return out;
}

std::vector<int> SearchSpace::nonUniformMeshSizes(int stages, int totalGpus,
                                                  int gpusPerNode) const {
  if (!nonUniformMeshes || level != SpaceLevel::Full || stages < 2)
    return {};
  std::vector<int> sizes;
  for (int g = 1; g <= totalGpus; ++g) {
    bool mesh = g >= gpusPerNode ? g % gpusPerNode == 0 : gpusPerNode % g == 0;
    // Within a factor of 2 of the even share totalGpus / stages.
    if (mesh && 2 * g * stages >= totalGpus && g * stages <= 2 * totalGpus)
      sizes.push_back(g);
  }
  // Some mix must add up: the smallest and largest sizes bound every sum.
  if (sizes.size() < 2 || sizes.front() * stages > totalGpus || sizes.back() * stages < totalGpus)
    return {};
  return sizes;
}

std::vector<int64_t> mist::divisorsOf(int64_t n) {
  std::vector<int64_t> small, large;
  for (int64_t d = 1; d <= n / d; ++d) // d * d would overflow near 2^63
    if (n % d == 0) {
      small.push_back(d);
      if (d != n / d)
        large.push_back(n / d);
    }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

std::vector<PlanWideChoice> SearchSpace::planWideChoices() const {
  std::vector<PlanWideChoice> tp{{false, false}};
  if (sequenceParallel)
    tp.push_back({true, false});
  if (sequenceParallel && tpCommOverlap)
    tp.push_back({true, true});
  std::vector<PlanWideChoice> choices = tp;
  if (selectiveRecompute)
    for (PlanWideChoice c : tp) {
      c.selectiveRecompute = true;
      choices.push_back(c);
    }
  return choices;
}

std::string mist::planWideChoiceText(const PlanWideChoice &c) {
  return std::string(c.commOverlap        ? ", sequence parallel, tp overlap"
                     : c.sequenceParallel ? ", sequence parallel"
                                          : "") +
         (c.selectiveRecompute ? ", selective recomputation" : "");
}
