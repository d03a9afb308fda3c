//===- Options.h - The emitted trainer's command line ---------------------===//
#pragma once

#include "runtime/trainer/LrSchedule.h"
#include <cstdint>
#include <optional>
#include <string>

namespace mist::rt {

struct Options {
  int steps = 10, logEvery = 1;
  int threads = 1; ///< per rank, for the CPU ops (GPU ranks ignore it)
  uint64_t seed = 1234;
  float lr = -1; ///< < 0: the model's
  // The schedule after warmup, overriding the model's train section.
  int warmupSteps = -1;           ///< < 0: the model's
  std::optional<LrDecay> lrDecay; ///< unset: the model's
  float minLr = -2;               ///< -2: the model's (-1 is "a tenth of lr")
  float decayFraction = -1;       ///< < 0: the model's
  std::string trace;              ///< write the last step's measured timeline here
  std::string logDir;   ///< --log-dir (--tensorboard-dir): metrics.jsonl and TensorBoard events
  std::string data;     ///< token file; empty: synthetic data
  bool shuffle = false; ///< read the token file's windows in a seeded shuffled order
  /// Megatron-LM indexed datasets (--data-path, its words joined by
  /// spaces: a prefix, or weights and prefixes), read in Megatron-LM's order
  /// (runtime/data/MegatronData.h); empty: none.
  std::string dataPath;
  std::string split = "969,30,1"; ///< --split: Megatron-LM's train/valid/test shares
  std::string ckptDir;
  int ckptEvery = 0; ///< 0: only at the end when --ckpt-dir is given
  bool resume = false;
  /// --init-from DIR: a new run starts from the weights of the checkpoint in
  /// DIR (a trainer's, or mistc --emit=checkpoint --from-hf's), with fresh
  /// optimizer state, step 1 and this run's schedule (Megatron-LM's
  /// --finetune).
  std::string initFrom;
  /// > 0: leave after this step, saving a checkpoint first when --ckpt-dir
  /// is given (--stop-after, or Megatron-LM's --exit-interval).
  int stopAfter = 0;
  /// > 0: leave after this step without saving, as a killed job would
  /// (--abandon-after: tests of --resume).
  int abandonAfter = 0;
  bool reschedule = false;   ///< --resume with this run's lr schedule, not the checkpoint's
  bool anyPlacement = false; ///< run even where the hosts do not match the plan's mesh
  bool printSbatch = false;  ///< print a Slurm batch script for this trainer and leave
  /// CPU ranks: g2g, h2d and d2h run on threads of their own, beside compute
  /// (GPU streams always do).
  bool overlap = false;
};

/// Parses --steps N, --lr X, --warmup-steps N, --lr-decay cosine|linear|constant|wsd,
/// --min-lr X, --decay-fraction F, --seed N, --log-every N, --threads N, --data FILE (an
/// llm.c-style token file; --shuffle reads its windows in an order drawn
/// from --seed), --data-path PREFIX | W1 PREFIX1 W2 PREFIX2 ... [--split A,B,C]
/// (Megatron-LM indexed datasets) or --synthetic, --ckpt-dir DIR, --ckpt-every N,
/// --resume [--reschedule], --init-from DIR, --stop-after N (or --exit-interval N),
/// --abandon-after N, --trace FILE, --any-placement and --print-sbatch. A bad
/// flag prints the usage and exits with status 2.
Options parseOptions(int argc, char **argv);

/// Prints `why` and the usage, and exits with status 2.
[[noreturn]] void usage(const std::string &why);

} // namespace mist::rt
