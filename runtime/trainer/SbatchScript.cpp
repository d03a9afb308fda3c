//===- SbatchScript.cpp - A Slurm batch script for this trainer's plan ----===//
#include "runtime/trainer/SbatchScript.h"

#include <algorithm>
#include <filesystem>

namespace mist::rt {

namespace {

/// `text` as one word of a POSIX shell command.
std::string shellQuoted(const std::string &text) {
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("-_./=:,+@%").find(c) != std::string_view::npos;
  });
  if (plain)
    return text;
  std::string quoted = "'";
  for (char c : text)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

} // namespace

std::string sbatchScript(const TrainerSpec &spec, const Options &o, int argc, char **argv,
                         bool gpus) {
  int ranks = 0;
  for (const StageSpec &s : spec.stages)
    ranks += s.dp * s.tp;
  const int perNode = std::max(1, std::min(ranks, spec.cluster.gpusPerNode));
  const int nodes = (ranks + perNode - 1) / perNode;
  std::error_code ec;
  std::string program = argc > 0 ? argv[0] : "./train";
  const std::filesystem::path absolute = std::filesystem::absolute(program, ec);
  if (!ec)
    program = absolute.lexically_normal().string();
  std::string command = shellQuoted(program);
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) != "--print-sbatch")
      command += " " + shellQuoted(argv[i]);

  std::string s = "#!/bin/bash\n";
  s += "# " + spec.model + ", plan " + spec.plan + ", made for the " + spec.cluster.name +
       " cluster: " + std::to_string(ranks) + " rank" + (ranks == 1 ? "" : "s") + " on " +
       std::to_string(nodes) + " node" + (nodes == 1 ? "" : "s") + " x " + std::to_string(perNode) +
       (gpus ? " GPUs" : " CPU ranks") + ".\n";
  s += "# Written by train --print-sbatch; submit with sbatch. The binary, the token file and\n"
       "# the checkpoint folder must be on a filesystem every node mounts (docs/launch.md).\n";
  s += "#SBATCH --job-name=" + shellQuoted(spec.model) + "\n";
  s += "#SBATCH --nodes=" + std::to_string(nodes) + "\n";
  s += "#SBATCH --ntasks-per-node=" + std::to_string(perNode) + "\n";
  if (gpus)
    s += "#SBATCH --gpus-per-node=" + std::to_string(perNode) + "\n";
  s += "#SBATCH --cpus-per-task=" + std::to_string(o.threads) + "\n";
  s += "#SBATCH --time=01:00:00   # your run's limit\n";
  // Two minutes before the limit every task gets SIGUSR1: the trainer ends
  // its step, saves (with --ckpt-dir) and leaves (runtime/trainer/StopSignals.h).
  s += "#SBATCH --signal=USR1@120\n";
  s += "#SBATCH --output=%x-%j.out\n";
  s += "set -euo pipefail\n";
  s += "# Consecutive ranks on each node (block), as the plan places tp groups and stages;\n"
       "# `srun --mpi=list` must list pmix (Open MPI does not start under pmi2 or none).\n";
  s += "# --kill-on-bad-exit=1: a rank that dies ends the job at once (else the others wait\n"
       "# in their next collective until the time limit).\n";
  s += "srun --mpi=pmix --kill-on-bad-exit=1 --ntasks-per-node=" + std::to_string(perNode) +
       " --distribution=block:block --cpu-bind=cores " + command + "\n";
  return s;
}

} // namespace mist::rt
