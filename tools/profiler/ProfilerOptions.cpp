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
  --linear-grad MODE     which GPU trainer the ops are timed as: bf16 (default: bf16 GEMMs
                         forward and backward, the kernels' bf16 overloads, cuDNN attention
                         where built), or tf32 / fp32 (fp32 data, as the fp32 GPU trainer runs)
  --skip-ops a,b         ops not to time (the performance model uses the roofline)
  --dtype f32|bf16       mist-profile-cpu: the type of the weights and activations the CPU
                         ops are timed on, as the trainer runs a plan of that dtype (default:
                         the model's, which --shapes records; else f32; statistics, the loss
                         and weight gradients are fp32 either way)
  --no-interference      do not measure stream interference (keeps the base's table)
  --interference-ms MS   how long each set of concurrent streams runs (default 200)
  --overlap              mist-profile-cpu: measure stream interference with the streams on
                         threads, as the trainer's --overlap runs them (without it a CPU
                         rank runs one stream and the table is not measured)

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

/// One command-line argument being read: its name ("--x" of "--x=v" or
/// "--x v") and the readers of its value, which set `error` on failure.
class ArgReader {
public:
  ArgReader(int argc, char **argv, std::string &error) : error(error), argc(argc), argv(argv) {}

  /// Steps to the next argument; false after the last.
  bool advance() {
    if (++i >= argc)
      return false;
    arg = argv[i];
    value.clear();
    inlineValue = false;
    if (arg.rfind("--", 0) == 0) {
      size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        inlineValue = true;
      }
    }
    return true;
  }

  const std::string &name() const { return arg; }

  /// The value: after '=' or the next argument.
  bool next(std::string &out) {
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
  }

  bool real(std::optional<double> &dst, bool positive) {
    std::string s;
    double v;
    if (!next(s))
      return false;
    if (!toDouble(s, v) || (positive ? v <= 0 : v < 0)) {
      error =
          arg + " needs a " + (positive ? "positive" : "non-negative") + " number, not '" + s + "'";
      return false;
    }
    dst = v;
    return true;
  }

  bool count(int &dst, int lo) {
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
  }

  bool optCount(std::optional<int> &dst) {
    int v = 0;
    if (!count(v, 1))
      return false;
    dst = v;
    return true;
  }

  std::string &error;

private:
  int argc;
  char **argv;
  int i = 0;
  std::string arg, value;
  bool inlineValue = false;
};

bool parseLinearGrad(ArgReader &a, LinearGradMode &mode) {
  std::string s;
  if (!a.next(s))
    return false;
  if (s == "bf16")
    mode = LinearGradMode::Bf16Gemms;
  else if (s == "tf32")
    mode = LinearGradMode::Tf32;
  else if (s == "fp32")
    mode = LinearGradMode::Fp32;
  else {
    a.error = "--linear-grad takes bf16, tf32 or fp32, not '" + s + "'";
    return false;
  }
  return true;
}

/// A comma-separated list; empty items are skipped.
bool parseSkipOps(ArgReader &a, std::set<std::string> &ops) {
  std::string s;
  if (!a.next(s))
    return false;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    std::string op = s.substr(start, comma == std::string::npos ? comma : comma - start);
    if (!op.empty())
      ops.insert(op);
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return true;
}

enum class Parsed { Ok, Failed, Unknown };

Parsed result(bool ok) { return ok ? Parsed::Ok : Parsed::Failed; }

/// What to measure and how (the usage's first block).
Parsed parseMeasurementFlag(ArgReader &a, ProfilerOptions &o) {
  const std::string &arg = a.name();
  if (arg == "--out")
    return result(a.next(o.out));
  if (arg == "--name")
    return result(a.next(o.name));
  if (arg == "--shapes")
    return result(a.next(o.shapesPath));
  if (arg == "--base")
    return result(a.next(o.basePath));
  if (arg == "--repeats")
    return result(a.count(o.repeats, 1));
  if (arg == "--warmup")
    return result(a.count(o.warmup, 0));
  if (arg == "--linear-grad")
    return result(parseLinearGrad(a, o.linearGrad));
  if (arg == "--skip-ops")
    return result(parseSkipOps(a, o.skipOps));
  if (arg == "--dtype") {
    o.dtypeGiven = true;
    if (!a.next(o.dtype))
      return Parsed::Failed;
    if (o.dtype != "f32" && o.dtype != "bf16") {
      a.error = "--dtype takes f32 or bf16, not '" + o.dtype + "'";
      return Parsed::Failed;
    }
    return Parsed::Ok;
  }
  if (arg == "--no-interference") {
    o.interference = false;
    return Parsed::Ok;
  }
  if (arg == "--overlap") {
    o.overlap = true;
    return Parsed::Ok;
  }
  if (arg == "--interference-ms") {
    std::optional<double> ms;
    bool ok = a.real(ms, true);
    if (ok)
      o.interferenceMs = *ms;
    return result(ok);
  }
  return Parsed::Unknown;
}

/// Figures no measurement gives (the usage's second block; they override
/// the --base file's).
Parsed parseFigureFlag(ArgReader &a, ProfilerOptions &o) {
  const std::string &arg = a.name();
  if (arg == "--peak-tflops")
    return result(a.real(o.peakTflops, true));
  if (arg == "--peak-mem-gbs")
    return result(a.real(o.peakMemGBs, true));
  if (arg == "--memory-gib")
    return result(a.real(o.memoryGiB, true));
  if (arg == "--usable-fraction") {
    bool ok = a.real(o.usableFraction, true);
    if (ok && *o.usableFraction > 1) {
      a.error = "--usable-fraction must be at most 1";
      ok = false;
    }
    return result(ok);
  }
  if (arg == "--nodes")
    return result(a.optCount(o.nodes));
  if (arg == "--gpus-per-node")
    return result(a.optCount(o.gpusPerNode));
  if (arg == "--p2p-intra-gbs")
    return result(a.real(o.p2pIntraGBs, true));
  if (arg == "--p2p-inter-gbs")
    return result(a.real(o.p2pInterGBs, true));
  if (arg == "--p2p-latency-us")
    return result(a.real(o.p2pLatencyUs, false));
  if (arg == "--host-memory-gib")
    return result(a.real(o.hostMemoryGiB, true));
  return Parsed::Unknown;
}

} // namespace

bool parseProfilerOptions(int argc, char **argv, ProfilerOptions &o, bool &help,
                          std::string &error) {
  help = false;
  ArgReader a(argc, argv, error);
  while (a.advance()) {
    if (a.name() == "--help" || a.name() == "-h") {
      help = true;
      return true;
    }
    Parsed p = parseMeasurementFlag(a, o);
    if (p == Parsed::Unknown)
      p = parseFigureFlag(a, o);
    if (p == Parsed::Unknown) {
      error = "unknown argument '" + a.name() + "' (see --help)";
      return false;
    }
    if (p == Parsed::Failed)
      return false;
  }
  if (o.out.empty()) {
    error = "--out FILE is required (see --help)";
    return false;
  }
  return true;
}

} // namespace mist::profiler
