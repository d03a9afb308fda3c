//===- ClusterReader.cpp - The one reader of cluster files ----------------===//
#include "format/ClusterReader.h"

#include "format/ClosestMatch.h"
#include "format/TextFile.h"
#include "format/YamlFields.h"

#include <algorithm>
#include <set>

namespace mist {

namespace {

/// Bounds that keep products such as nodes * gpus_per_node in an int.
constexpr int maxNodes = 1 << 16;
constexpr int maxGpusPerNode = 1 << 10;

/// A shape key: comma-separated operands, each empty (a scalar) or
/// positive dims joined by 'x', e.g. "8192x2048,2048x6144".
bool validShapeKey(const std::string &s) {
  if (s.empty())
    return false;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = std::min(s.find(',', start), s.size());
    std::string operand = s.substr(start, comma - start);
    if (!operand.empty()) {
      size_t d = 0;
      while (d <= operand.size()) {
        size_t x = std::min(operand.find('x', d), operand.size());
        std::string dim = operand.substr(d, x - d);
        if (dim.empty() || dim.size() > 18 ||
            dim.find_first_not_of("0123456789") != std::string::npos ||
            dim.find_first_not_of('0') == std::string::npos)
          return false;
        d = x + 1;
      }
    }
    start = comma + 1;
  }
  return true;
}

class ClusterFileReader {
public:
  ClusterFileReader(const ClusterReadOptions &options, YamlProblems &p) : options(options), p(p) {}

  std::optional<Cluster> read(const YamlNode &root) {
    if (root.kind != YamlNode::Kind::Map) {
      p.at(root, "expected a cluster description (a YAML mapping), found " + describeYaml(root));
      return std::nullopt;
    }
    YamlFields m(p, root, "cluster",
                 {"mist_cluster", "name", "nodes", "gpus_per_node", "tp_across_nodes", "device",
                  "collectives", "network", "p2p", "host", "interference"});
    int version = 0;
    if (m.getInt("mist_cluster", version, Need::Required) && version != clusterFormatVersion)
      p.at(m.valuePlace("mist_cluster"), "unsupported cluster format version " +
                                             std::to_string(version) + " (this mistc reads " +
                                             std::to_string(clusterFormatVersion) + ")");
    if (m.getString("name", c.name, Need::Required) && m.has("name") && c.name.empty())
      p.at(m.valuePlace("name"), "'name' must not be empty");
    bool shapeOk = m.getInt("nodes", c.nodes, Need::Required, Range::AtLeastOne);
    shapeOk &= m.getInt("gpus_per_node", c.gpusPerNode, Need::Required, Range::AtLeastOne);
    if (shapeOk && c.nodes > maxNodes) {
      p.at(m.valuePlace("nodes"), "'nodes' must be at most " + std::to_string(maxNodes));
      shapeOk = false;
    }
    if (shapeOk && c.gpusPerNode > maxGpusPerNode) {
      p.at(m.valuePlace("gpus_per_node"),
           "'gpus_per_node' must be at most " + std::to_string(maxGpusPerNode));
      shapeOk = false;
    }
    if (options.nodesOverride > 0) {
      if (options.nodesOverride > maxNodes) {
        p.at(0, 0, "--nodes must be at most " + std::to_string(maxNodes));
        shapeOk = false;
      }
      c.nodes = options.nodesOverride;
    }
    m.getBool("tp_across_nodes", c.tpAcrossNodes, Need::Optional);

    if (const YamlNode *dev = m.get("device", Need::Required))
      readDevice(*dev);
    if (const YamlNode *coll = m.get("collectives", Need::Optional))
      readCollectives(*coll, shapeOk);
    if (const YamlNode *net = m.get("network", Need::Optional))
      readNetwork(*net);
    if (shapeOk)
      checkCollectiveCoverage(m);
    readLinks(m);
    if (const YamlNode *intf = m.get("interference", Need::Optional))
      readInterference(*intf);
    if (p.count() != 0)
      return std::nullopt;
    return c;
  }

private:
  void readDevice(const YamlNode &n) {
    DeviceProfile &d = c.device;
    YamlFields m(p, n, "device",
                 {"name", "memory_gib", "usable_fraction", "peak_tflops", "tf32_peak_tflops",
                  "matmul_efficiency", "mem_bandwidth_gbs", "mem_efficiency", "sms", "gemm_tile",
                  "attention", "measured"});
    m.getString("name", d.name, Need::Required);
    m.getReal("memory_gib", d.memoryGiB, Need::Required, Range::Figure);
    m.getReal("usable_fraction", d.usableFraction, Need::Optional, Range::Fraction);
    m.getReal("peak_tflops", d.peakTflops, Need::Required, Range::Figure);
    m.getReal("tf32_peak_tflops", d.tf32PeakTflops, Need::Optional, Range::Figure);
    m.getReal("matmul_efficiency", d.matmulEfficiency, Need::Optional, Range::Fraction);
    m.getReal("mem_bandwidth_gbs", d.memBandwidthGBs, Need::Required, Range::Figure);
    m.getReal("mem_efficiency", d.memEfficiency, Need::Optional, Range::Fraction);
    m.getInt("sms", d.sms, Need::Optional, Range::Count);
    if (const YamlNode *tile = m.get("gemm_tile", Need::Optional)) {
      if (tile->kind != YamlNode::Kind::Seq || tile->seq.size() != 2)
        p.at(m.valuePlace("gemm_tile"), "expected [rows, columns] for 'gemm_tile'");
      else
        for (size_t i = 0; i < 2; ++i)
          yamlInt(p, tile->seq[i], "a GEMM tile size", d.gemmTile[i], Range::Count);
    }
    if (const YamlNode *att = m.get("attention", Need::Optional)) {
      YamlFields a(p, *att, "attention",
                   {"fwd_efficiency", "fwd_half_keys", "bwd_efficiency", "bwd_half_keys"});
      a.getReal("fwd_efficiency", d.attentionFwdEfficiency, Need::Required, Range::Fraction);
      a.getReal("fwd_half_keys", d.attentionFwdHalfKeys, Need::Required, Range::NonNegative);
      a.getReal("bwd_efficiency", d.attentionBwdEfficiency, Need::Required, Range::Fraction);
      a.getReal("bwd_half_keys", d.attentionBwdHalfKeys, Need::Required, Range::NonNegative);
    }
    if (const YamlNode *meas = m.get("measured", Need::Optional))
      readMeasured(*meas, m.valuePlace("measured"));
  }

  void readMeasured(const YamlNode &n, const YamlNode &place) {
    if (n.kind != YamlNode::Kind::Seq) {
      p.at(place, "expected a sequence of {op, shape, seconds} for 'measured'");
      return;
    }
    std::set<std::pair<std::string, std::string>> seen;
    for (const YamlNode &e : n.seq) {
      YamlFields m(p, e, "measured", {"op", "shape", "seconds"});
      if (!m.valid())
        continue;
      MeasuredOp op;
      bool ok = m.getString("op", op.op, Need::Required);
      if (ok && options.knownOp && !options.knownOp(op.op)) {
        p.at(m.valuePlace("op"), "unknown op '" + op.op + "' in 'measured'");
        ok = false;
      }
      if (m.getString("shape", op.shape, Need::Required) && !validShapeKey(op.shape)) {
        p.at(m.valuePlace("shape"), "bad shape key '" + op.shape +
                                        "' (expected operand shapes such as 8192x2048,2048x6144)");
        ok = false;
      }
      ok &= m.getReal("seconds", op.seconds, Need::Required, Range::Positive);
      if (ok && !seen.insert({op.op, op.shape}).second) {
        p.at(m.place(), "duplicate measured entry for '" + op.op + "' at shape " + op.shape);
        ok = false;
      }
      if (ok)
        c.device.measured.push_back(std::move(op));
    }
  }

  /// The links of the alpha-beta collective model (perfmodel/Collectives.h).
  void readNetwork(const YamlNode &n) {
    YamlFields m(p, n, "network",
                 {"nvlink_gbs", "nvlink_efficiency", "nics_per_node", "nic_gbs", "nic_efficiency"});
    NetworkLinks &net = c.network;
    m.getReal("nvlink_gbs", net.nvlinkGBs, Need::Required, Range::Figure);
    m.getReal("nvlink_efficiency", net.nvlinkEfficiency, Need::Optional, Range::Fraction);
    m.getInt("nics_per_node", net.nicsPerNode, Need::Optional, Range::Count);
    m.getReal("nic_gbs", net.nicGBs, Need::Optional, Range::Figure);
    m.getReal("nic_efficiency", net.nicEfficiency, Need::Optional, Range::Fraction);
    if (m.valid() && m.has("nics_per_node") != m.has("nic_gbs"))
      p.at(m.place(), "'network' needs both 'nics_per_node' and 'nic_gbs', or neither");
  }

  void readCollectives(const YamlNode &n, bool shapeOk) {
    const size_t before = p.count();
    readCollectiveEntries(n, shapeOk);
    collectiveProblems = p.count() != before;
  }

  void readCollectiveEntries(const YamlNode &n, bool shapeOk) {
    if (n.kind != YamlNode::Kind::Seq) {
      p.at(n, "expected a sequence of {nodes, gpus_per_node, bus_gbs, latency_us} for "
              "'collectives'");
      return;
    }
    for (const YamlNode &e : n.seq) {
      YamlFields m(p, e, "collectives", {"nodes", "gpus_per_node", "bus_gbs", "latency_us"});
      if (!m.valid())
        continue;
      CollectiveLink l;
      bool ok = m.getInt("nodes", l.nodes, Need::Required, Range::AtLeastOne);
      ok &= m.getInt("gpus_per_node", l.gpusPerNode, Need::Required, Range::AtLeastOne);
      ok &= m.getReal("bus_gbs", l.busGBs, Need::Required, Range::Figure);
      ok &= m.getReal("latency_us", l.latencyUs, Need::Optional, Range::NonNegative);
      if (!ok)
        continue;
      if (l.nodes > maxNodes) {
        p.at(m.valuePlace("nodes"), "'nodes' must be at most " + std::to_string(maxNodes));
        continue;
      }
      if (l.nodes == 1 && l.gpusPerNode == 1) {
        p.at(m.place(), "a collective entry needs a group of at least 2 GPUs");
        continue;
      }
      if (shapeOk && l.gpusPerNode > c.gpusPerNode) {
        p.at(m.valuePlace("gpus_per_node"),
             "collective entry has " + std::to_string(l.gpusPerNode) +
                 " GPUs per node but a node has " + std::to_string(c.gpusPerNode));
        continue;
      }
      bool duplicate = std::any_of(c.collectives.begin(), c.collectives.end(), [&](const auto &o) {
        return o.nodes == l.nodes && o.gpusPerNode == l.gpusPerNode;
      });
      if (duplicate) {
        p.at(m.place(), "duplicate collective entry for " + std::to_string(l.nodes) +
                            " node(s) x " + std::to_string(l.gpusPerNode) + " GPU(s)");
        continue;
      }
      c.collectives.push_back(l);
    }
  }

  /// The table must describe groups inside a node and, on several nodes,
  /// groups that span nodes: lookups only extrapolate between entries.
  void checkCollectiveCoverage(const YamlFields &m) {
    if (collectiveProblems)
      return; // some entries were bad; already reported
    if (c.network.present()) {
      // The network model covers every group; it needs NICs to span nodes.
      if (c.nodes > 1 && c.network.nicsPerNode == 0)
        p.at(m.keyPlace("network"), "'network' needs 'nics_per_node' and 'nic_gbs' for a "
                                    "cluster of " +
                                        std::to_string(c.nodes) + " nodes");
      return;
    }
    const YamlNode at = m.has("collectives") ? m.keyPlace("collectives") : m.place();
    auto any = [&](auto pred) {
      return std::any_of(c.collectives.begin(), c.collectives.end(), pred);
    };
    if (c.gpusPerNode > 1 && !any([](const CollectiveLink &l) { return l.nodes == 1; }))
      p.at(at, "'collectives' needs an entry inside one node (nodes: 1) for a node of " +
                   std::to_string(c.gpusPerNode) + " GPUs");
    if (c.nodes > 1 && !any([](const CollectiveLink &l) { return l.nodes > 1; })) {
      std::string msg = "'collectives' needs an entry spanning several nodes for a cluster of " +
                        std::to_string(c.nodes) + " nodes";
      if (options.nodesOverride > 0)
        msg += " (--nodes " + std::to_string(options.nodesOverride) + ")";
      p.at(at, msg);
    }
  }

  /// `p2p` and `host`: the links between GPUs and to host memory.
  void readLinks(YamlFields &m) {
    if (const YamlNode *p2p = m.get("p2p", Need::Required)) {
      YamlFields l(p, *p2p, "p2p", {"intra_gbs", "inter_gbs", "latency_us"});
      l.getReal("intra_gbs", c.p2pIntraGBs, Need::Required, Range::Figure);
      l.getReal("inter_gbs", c.p2pInterGBs, Need::Required, Range::Figure);
      l.getReal("latency_us", c.p2pLatencyUs, Need::Optional, Range::NonNegative);
    }
    if (const YamlNode *host = m.get("host", Need::Required)) {
      YamlFields h(p, *host, "host",
                   {"h2d_gbs", "d2h_gbs", "latency_us", "memory_gib", "gpus_per_link"});
      h.getReal("h2d_gbs", c.h2dGBs, Need::Required, Range::Figure);
      h.getReal("d2h_gbs", c.d2hGBs, Need::Required, Range::Figure);
      h.getReal("latency_us", c.hostLatencyUs, Need::Optional, Range::NonNegative);
      h.getReal("memory_gib", c.hostMemoryGiB, Need::Optional, Range::Figure);
      h.getInt("gpus_per_link", c.gpusPerHostLink, Need::Optional, Range::Count);
    }
  }

  /// The streams of one interference entry, as a bit mask; false after a problem.
  bool readStreams(const YamlNode &s, InterferenceEntry &entry, unsigned &mask) {
    if (s.kind != YamlNode::Kind::Seq || s.seq.size() < 2 || s.seq.size() > numStreams) {
      p.at(s, "'streams' must list 2 to 4 of compute, g2g, h2d, d2h");
      return false;
    }
    bool ok = true;
    for (const YamlNode &name : s.seq) {
      std::string text;
      if (!yamlString(p, name, "a stream", text)) {
        ok = false;
        continue;
      }
      std::optional<Stream> stream = parseStreamName(text);
      if (!stream) {
        std::string msg = "unknown stream '" + text + "' (expected compute, g2g, h2d or d2h)";
        if (auto close = closestMatch(text, {"compute", "g2g", "h2d", "d2h"}))
          msg += "; did you mean '" + *close + "'?";
        p.at(name, msg);
        ok = false;
        continue;
      }
      unsigned bit = 1u << static_cast<unsigned>(*stream);
      if (mask & bit) {
        p.at(name, "stream '" + text + "' is listed twice");
        ok = false;
        continue;
      }
      mask |= bit;
      entry.streams.push_back(*stream);
    }
    return ok;
  }

  void readInterference(const YamlNode &n) {
    if (n.kind != YamlNode::Kind::Seq) {
      p.at(n, "expected a sequence of {streams, factors} for 'interference'");
      return;
    }
    std::set<unsigned> seenMasks;
    for (const YamlNode &e : n.seq) {
      YamlFields m(p, e, "interference", {"streams", "factors"});
      if (!m.valid())
        continue;
      InterferenceEntry entry;
      unsigned mask = 0;
      const YamlNode *s = m.get("streams", Need::Required);
      bool ok = s && readStreams(*s, entry, mask);
      const YamlNode *f = m.get("factors", Need::Required);
      if (!f) {
        ok = false;
      } else if (f->kind != YamlNode::Kind::Seq) {
        p.at(*f, "expected a sequence of numbers for 'factors'");
        ok = false;
      } else {
        for (const YamlNode &x : f->seq) {
          double v = 0;
          if (yamlReal(p, x, "an interference factor", v, Range::AtLeastOne))
            entry.factors.push_back(v);
          else
            ok = false;
        }
        if (ok && entry.factors.size() != entry.streams.size()) {
          p.at(*f, "expected " + std::to_string(entry.streams.size()) +
                       " factors (one per stream), found " + std::to_string(entry.factors.size()));
          ok = false;
        }
      }
      if (ok && !seenMasks.insert(mask).second) {
        p.at(m.place(), "duplicate interference entry for this set of streams");
        ok = false;
      }
      if (ok)
        c.interference.push_back(std::move(entry));
    }
  }

  const ClusterReadOptions &options;
  YamlProblems &p;
  Cluster c;
  bool collectiveProblems = false;
};

} // namespace

std::optional<Cluster> readCluster(const std::string &text, const ClusterReadOptions &options,
                                   std::vector<TextProblem> &problems) {
  problems.clear();
  if (options.nodesOverride < 0) {
    problems.push_back({0, 0, "--nodes must be positive"});
    return std::nullopt;
  }
  YamlNode root;
  TextProblem syntax;
  if (!parseYamlSubset(text, root, syntax)) {
    problems.push_back(syntax);
    return std::nullopt;
  }
  YamlProblems p;
  std::optional<Cluster> c = ClusterFileReader(options, p).read(root);
  problems = p.all();
  return c;
}

bool readClusterFile(const std::string &path, const ClusterReadOptions &options, Cluster &out,
                     std::string &error) {
  return parseTextFile(path, error, [&](const std::string &text, std::string &why) {
    std::vector<TextProblem> problems;
    std::optional<Cluster> c = readCluster(text, options, problems);
    if (c) {
      out = std::move(*c);
      return true;
    }
    const TextProblem &first = problems.at(0);
    why = (first.line > 0 ? std::to_string(first.line) + ":" + std::to_string(first.column) + ": "
                          : std::string()) +
          first.message;
    if (problems.size() > 1)
      why += " (and " + std::to_string(problems.size() - 1) + " more)";
    return false;
  });
}

} // namespace mist
