//===- LrSchedule.h - The learning rate of each step ----------------------===//
/// \file
/// A run's learning-rate schedule: linear warmup over `warmupSteps`, then
/// cosine (default) or linear decay to `minLr` at `totalSteps`, a constant
/// rate, or WSD (warmup, stable, decay: lr until the last `decayFraction` of
/// the steps after warmup, then linear decay to `minLr`). Past `totalSteps`
/// (a resumed run that trains longer) the rate stays where it ended. It is
/// part of the run: a checkpoint records it (toMetadata) and a resumed run
/// continues it (fromMetadata).
//===----------------------------------------------------------------------===//
#pragma once

#include <map>
#include <optional>
#include <string>

namespace mist::rt {

enum class LrDecay { Cosine, Linear, Constant, Wsd };

const char *nameOf(LrDecay d); ///< "cosine", "linear", "constant", "wsd"
std::optional<LrDecay> lrDecayNamed(const std::string &name);

struct LrSchedule {
  float lr = 0;
  int warmupSteps = 0, totalSteps = 0;
  LrDecay decay = LrDecay::Cosine;
  float minLr = -1;           ///< < 0: a tenth of lr (the default)
  float decayFraction = 0.2f; ///< wsd: the decaying part of the steps after warmup
  bool operator==(const LrSchedule &) const = default;

  float at(int step) const; ///< the lr of `step`
  /// "lr 0.001, warmup 0, 8 steps" (and ", linear to 1e-05", ", wsd ..." when not the default).
  std::string str() const;
  /// The metadata keys a checkpoint records it under.
  void toMetadata(std::map<std::string, std::string> &meta) const;
  /// The schedule a checkpoint records; nullopt when it records none (older
  /// checkpoints, or one of the initial weights), `error` when it does not
  /// read back.
  static std::optional<LrSchedule> fromMetadata(const std::map<std::string, std::string> &meta,
                                                std::string &error);
};

} // namespace mist::rt
