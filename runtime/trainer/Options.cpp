//===- Options.cpp - The emitted trainer's command line -------------------===//
#include "runtime/trainer/Options.h"

#include "format/Limits.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace mist::rt {

namespace {
void printUsage(std::FILE *to) {
  std::fputs(
      "usage: train [--steps N] [--lr X] [--warmup-steps N] "
      "[--lr-decay cosine|linear|constant|wsd] [--min-lr X] [--decay-fraction F] [--seed N] "
      "[--log-every N] [--threads N] "
      "[--data FILE [--shuffle] | --data-path [W1] PREFIX1 [W2 PREFIX2 ...] [--split A,B,C] | "
      "--synthetic] [--ckpt-dir DIR [--ckpt-every N] [--resume "
      "[--reschedule]]] [--init-from DIR] "
      "[--stop-after N] [--abandon-after N] [--trace FILE] [--any-placement] [--overlap] "
      "[--print-sbatch] [--log-dir DIR] [--help]\n"
      "  --data FILE: an llm.c token file; --data-path: Megatron-LM indexed datasets "
      "(PREFIX.bin and PREFIX.idx), blended by the weights before the prefixes and split by "
      "--split (default 969,30,1) as Megatron-LM does, read in Megatron-LM's order for --seed\n"
      "  --init-from DIR: start from the weights of the checkpoint in DIR (a trainer's, or "
      "mistc --emit=checkpoint --from-hf's Hugging Face weights), with fresh optimizer state\n"
      "  --log-dir DIR (or --tensorboard-dir DIR): every step's loss, learning rate, gradient "
      "norm, throughput and memory into DIR/metrics.jsonl and a TensorBoard event file\n"
      "  --stop-after N (or --exit-interval N): leave after step N, saving a checkpoint first "
      "with --ckpt-dir; SIGTERM or SIGUSR1 (Slurm's --signal) does the same after the step "
      "under way\n"
      "  --abandon-after N: leave after step N without saving, as a killed job would (to try "
      "--resume)\n"
      "docs/launch.md and docs/runtime.md describe every flag.\n",
      to);
}
} // namespace

void usage(const std::string &why) {
  std::fprintf(stderr, "mistrt: %s\n", why.c_str());
  printUsage(stderr);
  std::exit(2);
}

Options parseOptions(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        usage("missing value for " + a);
      return argv[++i];
    };
    auto integer = [&](const std::string &v) {
      char *end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || !end || *end || n < 0 || n > limits::maxSteps)
        usage("not an integer from 0 to 1000000000: " + v);
      return n;
    };
    // A rate or fraction: finite and representable in the float the
    // trainer computes with (1e39 would be inf, 1e-50 zero).
    auto real = [&](const std::string &v, double &out) {
      char *end = nullptr;
      out = std::strtod(v.c_str(), &end);
      return !v.empty() && end && !*end && std::isfinite(out) && limits::fitsFloat(out);
    };
    if (a == "--steps")
      o.steps = static_cast<int>(integer(value()));
    else if (a == "--log-every")
      o.logEvery = std::max(1, static_cast<int>(integer(value())));
    else if (a == "--threads") {
      o.threads = static_cast<int>(integer(value()));
      if (o.threads < 1 || o.threads > 1024)
        usage("--threads takes 1 to 1024 threads per rank");
    } else if (a == "--seed")
      o.seed = static_cast<uint64_t>(integer(value()));
    else if (a == "--lr") {
      std::string v = value();
      double x = 0;
      if (!real(v, x) || !(x > 0))
        usage("--lr takes a positive learning rate between 1.2e-38 and 3.4e+38, not " + v);
      o.lr = float(x);
    } else if (a == "--warmup-steps") {
      o.warmupSteps = static_cast<int>(integer(value()));
    } else if (a == "--lr-decay") {
      std::string v = value();
      o.lrDecay = lrDecayNamed(v);
      if (!o.lrDecay)
        usage("--lr-decay takes cosine, linear, constant or wsd, not " + v);
    } else if (a == "--min-lr" || a == "--decay-fraction") {
      std::string v = value();
      double x = 0;
      const bool fraction = a == "--decay-fraction";
      if (!real(v, x) || !(fraction ? x > 0 && x <= 1 : x >= 0))
        usage(fraction ? "--decay-fraction takes a fraction in (0, 1], not " + v
                       : "--min-lr takes a learning rate >= 0 (a float), not " + v);
      (fraction ? o.decayFraction : o.minLr) = float(x);
    } else if (a == "--synthetic") {
      o.data.clear();
      o.dataPath.clear();
    } else if (a == "--data-path") {
      // Megatron-LM's form: the words up to the next flag.
      o.dataPath.clear();
      while (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0)
        o.dataPath += (o.dataPath.empty() ? "" : " ") + std::string(argv[++i]);
      if (o.dataPath.empty())
        usage("--data-path needs a dataset prefix, or weights and prefixes");
    } else if (a == "--split")
      o.split = value();
    else if (a == "--trace")
      o.trace = value();
    else if (a == "--data")
      o.data = value();
    else if (a == "--shuffle")
      o.shuffle = true;
    else if (a == "--ckpt-dir")
      o.ckptDir = value();
    else if (a == "--ckpt-every")
      o.ckptEvery = static_cast<int>(integer(value()));
    else if (a == "--resume")
      o.resume = true;
    else if (a == "--init-from") {
      o.initFrom = value();
      if (o.initFrom.empty())
        usage("--init-from needs a checkpoint folder");
    } else if (a == "--reschedule")
      o.reschedule = true;
    else if (a == "--any-placement")
      o.anyPlacement = true;
    else if (a == "--overlap")
      o.overlap = true;
    else if (a == "--print-sbatch")
      o.printSbatch = true;
    else if (a == "--help" || a == "-h") {
      printUsage(stdout);
      std::exit(0);
    } else if (a == "--log-dir" || a == "--tensorboard-dir") {
      o.logDir = value();
      if (o.logDir.empty())
        usage(a + " needs a folder");
    } else if (a == "--stop-after" || a == "--exit-interval")
      o.stopAfter = static_cast<int>(integer(value()));
    else if (a == "--abandon-after")
      o.abandonAfter = static_cast<int>(integer(value()));
    else
      usage("unknown flag " + a);
  }
  if (o.resume && !o.initFrom.empty())
    usage("--init-from starts a new run from a checkpoint's weights; --resume goes on with one: "
          "give one of them");
  if (o.resume && o.ckptDir.empty())
    usage("--resume needs --ckpt-dir");
  if (o.reschedule && !o.resume)
    usage("--reschedule needs --resume (it replaces a checkpoint's learning-rate schedule)");
  if (o.shuffle && o.data.empty())
    usage(o.dataPath.empty()
              ? "--shuffle needs --data (synthetic data has no order to shuffle)"
              : "--shuffle is for --data; Megatron-LM data is always read in its shuffled order");
  if (!o.data.empty() && !o.dataPath.empty())
    usage("--data and --data-path both name training data; give one");
  if (o.seed > UINT32_MAX)
    usage("--seed takes 0 to 4294967295");
  return o;
}

} // namespace mist::rt
