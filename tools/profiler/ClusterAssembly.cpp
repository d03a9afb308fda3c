//===- ClusterAssembly.cpp - Measurements + base + flags -> a cluster file ===//
#include "tools/profiler/ClusterAssembly.h"

#include "format/ClusterWriter.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

namespace mist::profiler {

namespace {

/// Rounds to `digits` significant digits (figures read better; the
/// measurements are not more precise than that).
double round(double v, int digits) {
  if (v == 0 || !std::isfinite(v))
    return v;
  double scale = std::pow(10.0, digits - 1 - static_cast<int>(std::floor(std::log10(std::abs(v)))));
  return std::round(v * scale) / scale;
}

/// The source table of the header comment.
class Sources {
public:
  void add(const std::string &field, char source, const std::string &note) {
    rows.push_back({field, std::string(1, source) + "  " + note});
  }
  std::vector<std::string> lines() const {
    size_t width = 0;
    for (const auto &r : rows)
      width = std::max(width, r.first.size());
    std::vector<std::string> out;
    for (const auto &r : rows)
      out.push_back("  " + r.first + std::string(width + 2 - r.first.size(), ' ') + r.second);
    return out;
  }

private:
  std::vector<std::pair<std::string, std::string>> rows;
};

std::string num(double v) { return yamlNumber(round(v, 4)); }

/// The node shape the run writes: flag, base, the MPI ranks, 1.
void nodeShape(const std::optional<Cluster> &base, const ProfilerOptions &opts, int ranks,
               int nodes, int ranksPerNode, int &outNodes, char &nodesSrc, int &outGpn,
               char &gpnSrc) {
  if (opts.nodes) {
    outNodes = *opts.nodes;
    nodesSrc = 'F';
  } else if (base) {
    outNodes = base->nodes;
    nodesSrc = 'B';
  } else if (ranks > 1) {
    outNodes = nodes;
    nodesSrc = 'M';
  } else {
    outNodes = 1;
    nodesSrc = 'D';
  }
  if (opts.gpusPerNode) {
    outGpn = *opts.gpusPerNode;
    gpnSrc = 'F';
  } else if (base) {
    outGpn = base->gpusPerNode;
    gpnSrc = 'B';
  } else if (ranks > 1 && ranksPerNode > 0) {
    outGpn = ranksPerNode;
    gpnSrc = 'M';
  } else {
    outGpn = 1;
    gpnSrc = 'D';
  }
}

} // namespace

bool checkAssemblyInputs(const std::optional<Cluster> &base, const ProfilerOptions &opts, int ranks,
                         int nodes, int ranksPerNode, bool ncclAvailable, std::string &error) {
  int n, g;
  char ns, gs;
  nodeShape(base, opts, ranks, nodes, ranksPerNode, n, ns, g, gs);
  const bool measures = ncclAvailable && ranks > 1 && ranksPerNode > 0;
  bool inside = measures && ranksPerNode > 1, across = measures && nodes > 1;
  if (base)
    for (const CollectiveLink &e : base->collectives) {
      inside |= e.nodes == 1 && e.gpusPerNode <= g;
      across |= e.nodes > 1 && e.gpusPerNode <= g;
    }
  if (g > 1 && !inside) {
    error = "a cluster of " + std::to_string(g) +
            " GPUs per node needs collective figures inside a node: give --base with a "
            "collective table, or run one rank per GPU under mpirun (NCCL)";
    return false;
  }
  if (n > 1 && !across) {
    error = "a cluster of " + std::to_string(n) +
            " nodes needs collective figures across nodes: give --base with a collective table, "
            "or run ranks on several nodes under mpirun (NCCL)";
    return false;
  }
  return true;
}

namespace {

/// A datasheet peak and the efficiency (achieved / peak) the performance
/// model prices with, and where each came from.
struct PeakFigure {
  const char *peakKey, *effKey; ///< without the "device." prefix
  const char *flag, *flagNote;  ///< the flag giving the peak, and what it is
  const char *rateName, *unit;  ///< what was measured, for messages
  std::optional<double> flagValue;
  double measured;         ///< the achieved rate; 0: not measured
  std::string howMeasured; ///< for the efficiency's source line
  const char *defaultEff;  ///< mistc's default efficiency, for the source line
};

/// The peak comes from its flag, else the base, else the measured rate
/// itself (efficiency 1, with a warning); the efficiency is measured / peak,
/// capped at 1, or the base's or mistc's default when nothing was measured.
void assignPeak(const PeakFigure &f, bool haveBase, const std::string &basePath, double &peak,
                double &efficiency, Sources &src, std::vector<std::string> &warn) {
  const std::string peakKey = std::string("device.") + f.peakKey,
                    effKey = std::string("device.") + f.effKey;
  if (f.flagValue) {
    peak = *f.flagValue;
    src.add(peakKey, 'F', std::string(f.flag) + " (" + f.flagNote + "; not measurable)");
  } else if (haveBase) {
    src.add(peakKey, 'B', basePath + " (datasheet)");
  } else if (f.measured > 0) {
    peak = round(f.measured, 4);
    src.add(peakKey, 'M',
            std::string("no ") + f.flag + " or base: the measured " + f.rateName + ", so " +
                f.effKey + " is 1");
    warn.push_back(std::string("no ") + f.flag + " and no --base: " + f.peakKey +
                   " is the measured " + f.rateName);
  }
  const bool peakMeasured = !f.flagValue && !haveBase && f.measured > 0;
  if (f.measured > 0 && peak > 0) {
    double eff = peakMeasured ? 1 : f.measured / peak;
    if (eff > 1) {
      warn.push_back("the measured " + std::string(f.rateName) + " " + num(f.measured) + " " +
                     f.unit + " exceeds " + f.peakKey + " " + num(peak) + ": " + f.effKey +
                     " capped at 1 (is the peak right?)");
      eff = 1;
    }
    efficiency = round(eff, 3);
    src.add(effKey, 'M', f.howMeasured + ": " + num(f.measured) + " " + f.unit + " / " + num(peak));
  } else {
    src.add(effKey, haveBase ? 'B' : 'D',
            haveBase ? basePath : std::string("mistc's default ") + f.defaultEff);
  }
}

} // namespace

namespace {

/// Fills a cluster's figures section by section, recording where each came
/// from; the sections run in the order the header comment lists them.
class ClusterAssembler {
public:
  ClusterAssembler(const Measurements &m, const std::optional<Cluster> &base,
                   const ProfilerOptions &opts, std::vector<std::string> &warn)
      : m(m), base(base), opts(opts), warn(warn), c(base ? *base : Cluster{}),
        basePath(opts.basePath.empty() ? "the base" : opts.basePath) {}

  void shape();
  void device();
  void measuredOps();
  void collectives();
  void p2p();
  void host();
  /// The header comment: who measured what, then the source table.
  std::vector<std::string> comment() const;

  Cluster &figures() { return c; }

private:
  /// p2p.*: flag, measured, base, default.
  void link(const char *field, const std::optional<double> &flag, const char *flagName,
            double measured, const std::string &how, double baseValue, double dflt, double &dst);

  const Measurements &m;
  const std::optional<Cluster> &base;
  const ProfilerOptions &opts;
  std::vector<std::string> &warn;
  Cluster c;
  Sources src;
  const std::string basePath;
};

/// The name and the node shape.
void ClusterAssembler::shape() {
  if (!opts.name.empty()) {
    c.name = opts.name;
    src.add("name", 'F', "--name");
  } else {
    // Profiling on top of a measured file keeps its name (no "measured-measured").
    const bool measuredBase = base && base->name.ends_with("measured");
    c.name = !base ? "measured" : measuredBase ? base->name : base->name + "-measured";
    src.add("name", 'D',
            !base          ? "\"measured\""
            : measuredBase ? "the base's name"
                           : "the base's name + \"-measured\"");
  }
  char ns, gs;
  nodeShape(base, opts, m.ranks, m.nodes, m.ranksPerNode, c.nodes, ns, c.gpusPerNode, gs);
  src.add("nodes", ns,
          ns == 'F'   ? "--nodes"
          : ns == 'M' ? "hosts of the MPI ranks"
          : ns == 'B' ? basePath
                      : "one node");
  src.add("gpus_per_node", gs,
          gs == 'F'   ? "--gpus-per-node"
          : gs == 'M' ? "MPI ranks per host"
          : gs == 'B' ? basePath
                      : "one GPU");
  src.add("tp_across_nodes", base ? 'B' : 'D', base ? basePath : "false");
}

/// The device: name, memory, and the compute and memory peaks.
void ClusterAssembler::device() {
  c.device.name = m.deviceName;
  src.add("device.name", 'M', m.deviceNameWhat);
  if (opts.memoryGiB) {
    c.device.memoryGiB = *opts.memoryGiB;
    src.add("device.memory_gib", 'F', "--memory-gib");
  } else if (base && m.baseMemoryFirst && base->device.memoryGiB > 0) {
    c.device.memoryGiB = base->device.memoryGiB;
    src.add("device.memory_gib", 'B', basePath);
  } else {
    c.device.memoryGiB = round(m.memoryGiB, 4);
    src.add("device.memory_gib", 'M', m.memoryWhat);
  }
  if (opts.usableFraction) {
    c.device.usableFraction = *opts.usableFraction;
    src.add("device.usable_fraction", 'F', "--usable-fraction");
  } else {
    src.add("device.usable_fraction", base ? 'B' : 'D', base ? basePath : "mistc's default 0.92");
  }

  // Compute: the datasheet peak and the achieved rate of a large GEMM.
  const std::string gemm = m.gemmKind + " GEMM", gemmRate = gemm + " rate";
  assignPeak({"peak_tflops", "matmul_efficiency", "--peak-tflops", "datasheet dense bf16",
              gemmRate.c_str(), "TFLOP/s", opts.peakTflops, m.gemmTflops,
              gemm + " " + m.gemmShape + " (" + m.gemmCall + ")", "0.75 (no GEMM measured)"},
             base.has_value(), basePath, c.device.peakTflops, c.device.matmulEfficiency, src, warn);
  // Memory: the datasheet bandwidth and a device-to-device copy.
  assignPeak(
      {"mem_bandwidth_gbs", "mem_efficiency", "--peak-mem-gbs", "datasheet", "copy rate",
       "GB/s (read + write)", opts.peakMemGBs, m.d2dGBs, m.copyWhat + " of " + m.d2dWhat, "0.8"},
      base.has_value(), basePath, c.device.memBandwidthGBs, c.device.memEfficiency, src, warn);
}

/// Measured ops: this run's, then the base's entries this run did not measure.
void ClusterAssembler::measuredOps() {
  std::map<std::pair<std::string, std::string>, double> table;
  size_t kept = 0;
  for (const MeasuredOp &o : m.ops)
    table[{o.op, o.shape}] = o.seconds;
  if (base)
    for (const MeasuredOp &o : base->device.measured)
      if (table.emplace(std::pair{o.op, o.shape}, o.seconds).second)
        ++kept;
  c.device.measured.clear();
  for (const auto &[key, s] : table)
    c.device.measured.push_back({key.first, key.second, s});
  if (m.opsListed > 0)
    src.add("device.measured", 'M',
            std::to_string(m.ops.size()) + " of the " + std::to_string(m.opsListed) +
                " ops of --shapes " + opts.shapesPath + ", " + m.opsHow);
  else
    src.add("device.measured", kept ? 'B' : 'D', kept ? basePath : "none (no --shapes)");
  if (kept && m.opsListed > 0)
    src.add("device.measured", 'B', std::to_string(kept) + " more entries from " + basePath);
  if (!m.notTimed.empty())
    src.add("device.measured", 'D',
            std::to_string(m.notTimed.size()) + " not timed, left to the roofline:");
  // One line per op and reason, with the number of shapes.
  std::vector<std::pair<std::pair<std::string, std::string>, int>> groups;
  for (const NotTimedOp &n : m.notTimed) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto &g) { return g.first == std::pair(n.op, n.why); });
    if (it == groups.end())
      groups.push_back({{n.op, n.why}, 1});
    else
      ++it->second;
  }
  for (const auto &[key, count] : groups)
    src.add("", ' ',
            "  " + key.first + " (" + std::to_string(count) + " shape" + (count > 1 ? "s" : "") +
                "): " + key.second);
}

/// Collectives: the base's table with this run's entries in place of the same shapes.
void ClusterAssembler::collectives() {
  for (const CollectiveLink &e : m.collectives) {
    auto it = std::find_if(c.collectives.begin(), c.collectives.end(), [&](const auto &x) {
      return x.nodes == e.nodes && x.gpusPerNode == e.gpusPerNode;
    });
    if (it != c.collectives.end())
      *it = e;
    else
      c.collectives.push_back(e);
  }
  size_t before = c.collectives.size();
  c.collectives.erase(
      std::remove_if(c.collectives.begin(), c.collectives.end(),
                     [&](const CollectiveLink &e) { return e.gpusPerNode > c.gpusPerNode; }),
      c.collectives.end());
  std::stable_sort(c.collectives.begin(), c.collectives.end(), [](const auto &a, const auto &b) {
    return std::pair(a.nodes, a.gpusPerNode) < std::pair(b.nodes, b.gpusPerNode);
  });
  if (!m.collectives.empty()) {
    std::string shapes;
    for (const CollectiveLink &e : m.collectives)
      shapes += (shapes.empty() ? "" : ", ") + std::to_string(e.nodes) + "x" +
                std::to_string(e.gpusPerNode);
    src.add("collectives", 'M', shapes + ": " + m.collectivesHow);
  }
  if (base && c.collectives.size() > m.collectives.size())
    src.add("collectives", 'B', (m.collectives.empty() ? "" : "the other entries: ") + basePath);
  if (c.collectives.size() < before)
    warn.push_back("dropped collective entries with more GPUs per node than gpus_per_node");
  if (m.collectives.empty() && !m.ncclSkipped.empty())
    src.add("collectives", ' ', "not measured: " + m.ncclSkipped);
}

void ClusterAssembler::link(const char *field, const std::optional<double> &flag,
                            const char *flagName, double measured, const std::string &how,
                            double baseValue, double dflt, double &dst) {
  if (flag) {
    dst = *flag;
    src.add(field, 'F', flagName);
  } else if (measured >= 0 && !how.empty()) {
    dst = round(measured, 4);
    src.add(field, 'M', how);
  } else if (base) {
    dst = baseValue;
    src.add(field, 'B', basePath);
  } else {
    dst = dflt;
    src.add(field, 'D', "placeholder " + num(dflt) + " (no measurement, flag or base)");
  }
}

/// The point-to-point links inside and between nodes.
void ClusterAssembler::p2p() {
  const bool p2pMeasured = m.p2pLatencyUs >= 0;
  link("p2p.intra_gbs", opts.p2pIntraGBs, "--p2p-intra-gbs", m.p2pIntraGBs,
       m.p2pIntraGBs > 0 ? m.p2pHow + " between two ranks of a node" : "",
       base ? base->p2pIntraGBs : 0, 25, c.p2pIntraGBs);
  link("p2p.inter_gbs", opts.p2pInterGBs, "--p2p-inter-gbs", m.p2pInterGBs,
       m.p2pInterGBs > 0 ? m.p2pHow + " between two nodes" : "", base ? base->p2pInterGBs : 0, 12.5,
       c.p2pInterGBs);
  link("p2p.latency_us", opts.p2pLatencyUs, "--p2p-latency-us", m.p2pLatencyUs,
       p2pMeasured ? m.p2pLatencyHow : "", base ? base->p2pLatencyUs : 0, 10, c.p2pLatencyUs);
}

/// Host copies (always measured), host memory and the interference table.
void ClusterAssembler::host() {
  c.h2dGBs = round(m.h2dGBs, 4);
  c.d2hGBs = round(m.d2hGBs, 4);
  c.hostLatencyUs = round(m.hostLatencyUs, 3);
  src.add("host.h2d_gbs, d2h_gbs", 'M', m.hostWhat);
  src.add("host.latency_us", 'M', m.hostLatencyWhat);
  if (opts.hostMemoryGiB) {
    c.hostMemoryGiB = *opts.hostMemoryGiB;
    src.add("host.memory_gib", 'F', "--host-memory-gib");
  } else {
    src.add("host.memory_gib", base && base->hostMemoryGiB > 0 ? 'B' : 'D',
            base && base->hostMemoryGiB > 0 ? basePath : "absent: unlimited");
  }

  if (!m.interference.empty()) {
    c.interference = m.interference;
    src.add("interference", 'M', m.interferenceHow);
  } else {
    src.add("interference", base && !c.interference.empty() ? 'B' : 'D',
            base && !c.interference.empty() ? basePath + " (not measured)"
                                            : "none (not measured): pure overlap");
  }
}

std::vector<std::string> ClusterAssembler::comment() const {
  std::vector<std::string> h;
  h.push_back(c.name + ": measured by " + m.tool + " (tools/profiler) on " + m.host + ", " +
              m.when);
  h.push_back("device: " + m.deviceName + "; " + std::to_string(m.ranks) + " MPI rank(s) on " +
              std::to_string(m.nodes) + " host(s); " + m.software);
  h.push_back("every time is the median of " + std::to_string(m.repeats) + " runs after " +
              std::to_string(m.warmup) + " warm-up runs (" + m.timer + ")");
  h.push_back("");
  h.push_back("Source of every figure: M = measured by this run; B = copied from the base file;");
  h.push_back("F = given as a flag; D = mist-profile's or mistc's default. See docs/cluster.md,");
  h.push_back("\"Profiling a cluster\".");
  for (const std::string &line : src.lines())
    h.push_back(line);
  return h;
}

} // namespace

bool assembleCluster(const Measurements &m, const std::optional<Cluster> &base,
                     const ProfilerOptions &opts, AssembledCluster &out, std::string &error) {
  ClusterAssembler assembler(m, base, opts, out.warnings);
  assembler.shape();
  assembler.device();
  assembler.measuredOps();
  assembler.collectives();
  assembler.p2p();
  assembler.host();

  std::vector<std::string> problems = checkCluster(assembler.figures());
  if (!problems.empty()) {
    error = "the measured cluster would not load: " + problems.front();
    for (size_t i = 1; i < problems.size(); ++i)
      error += "; " + problems[i];
    return false;
  }
  for (const std::string &line : assembler.comment())
    out.comment.push_back(line);
  out.figures = std::move(assembler.figures());
  return true;
}

} // namespace mist::profiler
