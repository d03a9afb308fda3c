//===- ProfilerOptions.cpp - mist-profile's command line ------------------===//
#include "tools/profiler/ProfilerOptions.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string_view>

namespace mist::profiler {

const char *profilerUsage() {
  return R"(usage: mist-profile --out cluster.yaml [options]
       mpirun -np N mist-profile ...   (one rank per GPU: also NCCL collectives, p2p)

Measures on this machine's GPU(s) what mistc's performance model needs and
writes a cluster file (docs/cluster.md, "Profiling a cluster"). Exits 77 when
there is no GPU.

  --out FILE             the cluster YAML to write (required)
  --name NAME            its name (default: the base's name + "-measured", else "measured")
  --shapes FILE          ops to time, from `mistc MODEL --emit=profile-shapes`
  --base FILE            a cluster file whose figures are kept where nothing is measured
                         (node shape, collectives not measured, p2p, host memory, datasheet peaks)
  --repeats N            measured runs per figure, the median counts (default 20)
  --warmup N             unmeasured runs before them (default 3)
  --linear-grad MODE     how linear, lm_head and their _grad ops are timed: bf16 (default:
                         bf16 GEMMs, the backward's two as two), or tf32 / fp32 (fp32 data
                         through linearFwdCuda / linearBwdCuda, as the fp32 GPU trainer runs)
  --skip-ops a,b         ops not to time (the performance model uses the roofline)
  --no-interference      do not measure stream interference (keeps the base's table)
  --interference-ms MS   how long each set of concurrent streams runs (default 200)

Figures that cannot be measured (default: the --base file's; without one, as noted):
  --peak-tflops X        datasheet dense bf16 peak, TFLOP/s, e.g. 989 for H100 SXM
                         (without it and a base: the measured GEMM rate, efficiency 1)
  --peak-mem-gbs X       datasheet memory bandwidth, GB/s, e.g. 3350 for H100 SXM
                         (without it and a base: the measured copy rate, efficiency 1)
  --memory-gib X         device memory (default: what the driver reports)
  --usable-fraction X    part of it a plan may use (default 0.92)
  --nodes N              nodes of the cluster (default 1)
  --gpus-per-node N      GPUs per node (default: the ranks on this node)
  --p2p-intra-gbs X      pipeline sends inside a node (default: measured with 2+ ranks, else 25)
  --p2p-inter-gbs X      pipeline sends across nodes (default: measured across nodes, else 12.5)
  --p2p-latency-us X     (default: measured with 2+ ranks, else 10)
  --host-memory-gib X    host memory per node that offloading may pin (default: unlimited)
)";
}

namespace {

bool toDouble(const std::string &s, double &v) {
  if (s.empty())
    return false;
  errno = 0;
  char *end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return !*end && !errno && std::isfinite(v);
}

bool toInt(const std::string &s, int &v) {
  if (s.empty())
    return false;
  errno = 0;
  char *end = nullptr;
  long x = std::strtol(s.c_str(), &end, 10);
  if (*end || errno || x < -(1L << 30) || x > (1L << 30))
    return false;
  v = static_cast<int>(x);
  return true;
}

} // namespace

bool parseProfilerOptions(int argc, char **argv, ProfilerOptions &o, bool &help,
                          std::string &error) {
  help = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool inlineValue = false;
    if (arg.rfind("--", 0) == 0) {
      size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        inlineValue = true;
      }
    }
    auto next = [&](std::string &out) {
      if (inlineValue) {
        out = value;
        return true;
      }
      if (i + 1 >= argc) {
        error = arg + " needs a value";
        return false;
      }
      out = argv[++i];
      return true;
    };
    auto real = [&](std::optional<double> &dst, bool positive) {
      std::string s;
      double v;
      if (!next(s))
        return false;
      if (!toDouble(s, v) || (positive ? v <= 0 : v < 0)) {
        error = arg + " needs a " + (positive ? "positive" : "non-negative") + " number, not '" +
                s + "'";
        return false;
      }
      dst = v;
      return true;
    };
    auto count = [&](int &dst, int lo) {
      std::string s;
      int v;
      if (!next(s))
        return false;
      if (!toInt(s, v) || v < lo) {
        error = arg + " needs an integer of at least " + std::to_string(lo) + ", not '" + s + "'";
        return false;
      }
      dst = v;
      return true;
    };
    auto optCount = [&](std::optional<int> &dst) {
      int v = 0;
      if (!count(v, 1))
        return false;
      dst = v;
      return true;
    };
    bool ok = true;
    if (arg == "--help" || arg == "-h") {
      help = true;
      return true;
    } else if (arg == "--out") {
      ok = next(o.out);
    } else if (arg == "--name") {
      ok = next(o.name);
    } else if (arg == "--shapes") {
      ok = next(o.shapesPath);
    } else if (arg == "--base") {
      ok = next(o.basePath);
    } else if (arg == "--repeats") {
      ok = count(o.repeats, 1);
    } else if (arg == "--warmup") {
      ok = count(o.warmup, 0);
    } else if (arg == "--linear-grad") {
      std::string s;
      ok = next(s);
      if (ok && s == "bf16")
        o.linearGrad = LinearGradMode::Bf16Gemms;
      else if (ok && s == "tf32")
        o.linearGrad = LinearGradMode::Tf32;
      else if (ok && s == "fp32")
        o.linearGrad = LinearGradMode::Fp32;
      else if (ok) {
        error = "--linear-grad takes bf16, tf32 or fp32, not '" + s + "'";
        ok = false;
      }
    } else if (arg == "--skip-ops") {
      std::string s;
      ok = next(s);
      size_t start = 0;
      while (ok && start <= s.size()) {
        size_t comma = s.find(',', start);
        std::string op = s.substr(start, comma == std::string::npos ? comma : comma - start);
        if (!op.empty())
          o.skipOps.insert(op);
        if (comma == std::string::npos)
          break;
        start = comma + 1;
      }
    } else if (arg == "--no-interference") {
      o.interference = false;
    } else if (arg == "--interference-ms") {
      std::optional<double> ms;
      ok = real(ms, true);
      if (ok)
        o.interferenceMs = *ms;
    } else if (arg == "--peak-tflops") {
      ok = real(o.peakTflops, true);
    } else if (arg == "--peak-mem-gbs") {
      ok = real(o.peakMemGBs, true);
    } else if (arg == "--memory-gib") {
      ok = real(o.memoryGiB, true);
    } else if (arg == "--usable-fraction") {
      ok = real(o.usableFraction, true);
      if (ok && *o.usableFraction > 1) {
        error = "--usable-fraction must be at most 1";
        ok = false;
      }
    } else if (arg == "--nodes") {
      ok = optCount(o.nodes);
    } else if (arg == "--gpus-per-node") {
      ok = optCount(o.gpusPerNode);
    } else if (arg == "--p2p-intra-gbs") {
      ok = real(o.p2pIntraGBs, true);
    } else if (arg == "--p2p-inter-gbs") {
      ok = real(o.p2pInterGBs, true);
    } else if (arg == "--p2p-latency-us") {
      ok = real(o.p2pLatencyUs, false);
    } else if (arg == "--host-memory-gib") {
      ok = real(o.hostMemoryGiB, true);
    } else {
      error = "unknown argument '" + arg + "' (see --help)";
      return false;
    }
    if (!ok)
      return false;
  }
  if (o.out.empty()) {
    error = "--out FILE is required (see --help)";
    return false;
  }
  return true;
}

} // namespace mist::profiler
