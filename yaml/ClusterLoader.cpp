//===- ClusterLoader.cpp - Read a cluster description ---------------------===//
#include "yaml/ClusterLoader.h"

#include "ir/IR.h"
#include "yaml/YamlReader.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include <set>

using namespace mist;

namespace {

/// Bounds that keep products such as nodes * gpus_per_node in an int.
constexpr int maxNodes = 1 << 16;
constexpr int maxGpusPerNode = 1 << 10;

class ClusterParser {
public:
  ClusterParser(unsigned bufferId, DiagnosticEngine &diag) : r(bufferId, diag), diag(diag) {}

  std::optional<Cluster> parse(int nodesOverride) {
    unsigned before = diag.errorCount();
    auto top = r.parseTopMapping("cluster description");
    if (!top)
      return std::nullopt;
    static const llvm::StringRef keys[] = {
        "mist_cluster", "name",    "nodes", "gpus_per_node", "tp_across_nodes", "device",
        "collectives",  "network", "p2p",   "host",          "interference"};
    YamlMap m(r, *top, "cluster", keys);
    int version = 0;
    if (m.getInt("mist_cluster", version, Need::Required) && version != clusterFormatVersion)
      r.error(m.valueLoc("mist_cluster"), "unsupported cluster format version " +
                                              std::to_string(version) + " (this mistc reads " +
                                              std::to_string(clusterFormatVersion) + ")");
    m.getString("name", c.name, Need::Required);
    if (m.has("name") && c.name.empty())
      r.error(m.valueLoc("name"), "'name' must not be empty");
    bool shapeOk = m.getInt("nodes", c.nodes, Need::Required, Range::AtLeastOne);
    shapeOk &= m.getInt("gpus_per_node", c.gpusPerNode, Need::Required, Range::AtLeastOne);
    if (shapeOk && c.nodes > maxNodes) {
      r.error(m.valueLoc("nodes"), "'nodes' must be at most " + std::to_string(maxNodes));
      shapeOk = false;
    }
    if (shapeOk && c.gpusPerNode > maxGpusPerNode) {
      r.error(m.valueLoc("gpus_per_node"),
              "'gpus_per_node' must be at most " + std::to_string(maxGpusPerNode));
      shapeOk = false;
    }
    if (nodesOverride > 0) {
      if (nodesOverride > maxNodes) {
        diag.error({}, "--nodes must be at most " + std::to_string(maxNodes));
        shapeOk = false;
      }
      c.nodes = nodesOverride;
    }
    m.getBool("tp_across_nodes", c.tpAcrossNodes, Need::Optional);

    if (auto dev = m.get("device", Need::Required))
      parseDevice(*dev, m.valueLoc("device"));
    if (auto coll = m.get("collectives", Need::Optional))
      parseCollectives(*coll, m.valueLoc("collectives"), shapeOk);
    if (auto net = m.get("network", Need::Optional))
      parseNetwork(*net, m.valueLoc("network"));
    if (shapeOk)
      checkCollectiveCoverage(m, nodesOverride);
    if (auto p2p = m.get("p2p", Need::Required)) {
      YamlMap p(r, *p2p, "p2p", {"intra_gbs", "inter_gbs", "latency_us"}, m.valueLoc("p2p"));
      p.getReal("intra_gbs", c.p2pIntraGBs, Need::Required, Range::Figure);
      p.getReal("inter_gbs", c.p2pInterGBs, Need::Required, Range::Figure);
      p.getReal("latency_us", c.p2pLatencyUs, Need::Optional, Range::NonNegative);
    }
    if (auto host = m.get("host", Need::Required)) {
      YamlMap h(r, *host, "host",
                {"h2d_gbs", "d2h_gbs", "latency_us", "memory_gib", "gpus_per_link"},
                m.valueLoc("host"));
      h.getReal("h2d_gbs", c.h2dGBs, Need::Required, Range::Figure);
      h.getReal("d2h_gbs", c.d2hGBs, Need::Required, Range::Figure);
      h.getReal("latency_us", c.hostLatencyUs, Need::Optional, Range::NonNegative);
      h.getReal("memory_gib", c.hostMemoryGiB, Need::Optional, Range::Figure);
      h.getInt("gpus_per_link", c.gpusPerHostLink, Need::Optional, Range::Count);
    }
    if (auto intf = m.get("interference", Need::Optional))
      parseInterference(*intf, m.valueLoc("interference"));
    if (diag.errorCount() != before)
      return std::nullopt;
    return c;
  }

private:
  void parseDevice(const YAML::Node &n, llvm::SMLoc at) {
    DeviceProfile &d = c.device;
    static const llvm::StringRef keys[] = {"name",
                                           "memory_gib",
                                           "usable_fraction",
                                           "peak_tflops",
                                           "tf32_peak_tflops",
                                           "matmul_efficiency",
                                           "mem_bandwidth_gbs",
                                           "mem_efficiency",
                                           "sms",
                                           "gemm_tile",
                                           "attention",
                                           "measured"};
    YamlMap m(r, n, "device", keys, at);
    m.getString("name", d.name, Need::Required);
    m.getReal("memory_gib", d.memoryGiB, Need::Required, Range::Figure);
    m.getReal("usable_fraction", d.usableFraction, Need::Optional, Range::Fraction);
    m.getReal("peak_tflops", d.peakTflops, Need::Required, Range::Figure);
    m.getReal("tf32_peak_tflops", d.tf32PeakTflops, Need::Optional, Range::Figure);
    m.getReal("matmul_efficiency", d.matmulEfficiency, Need::Optional, Range::Fraction);
    m.getReal("mem_bandwidth_gbs", d.memBandwidthGBs, Need::Required, Range::Figure);
    m.getReal("mem_efficiency", d.memEfficiency, Need::Optional, Range::Fraction);
    m.getInt("sms", d.sms, Need::Optional, Range::Count);
    if (auto tile = m.get("gemm_tile", Need::Optional))
      parseGemmTile(*tile, m.valueLoc("gemm_tile"));
    if (auto att = m.get("attention", Need::Optional)) {
      YamlMap a(r, *att, "attention",
                {"fwd_efficiency", "fwd_half_keys", "bwd_efficiency", "bwd_half_keys"},
                m.valueLoc("attention"));
      a.getReal("fwd_efficiency", d.attentionFwdEfficiency, Need::Required, Range::Fraction);
      a.getReal("fwd_half_keys", d.attentionFwdHalfKeys, Need::Required, Range::NonNegative);
      a.getReal("bwd_efficiency", d.attentionBwdEfficiency, Need::Required, Range::Fraction);
      a.getReal("bwd_half_keys", d.attentionBwdHalfKeys, Need::Required, Range::NonNegative);
    }
    if (auto meas = m.get("measured", Need::Optional))
      parseMeasured(*meas, m.valueLoc("measured"));
  }

  void parseGemmTile(const YAML::Node &n, llvm::SMLoc at) {
    if (!n.IsSequence() || n.size() != 2) {
      r.error(at, "expected [rows, columns] for 'gemm_tile'");
      return;
    }
    for (size_t i = 0; i < 2; ++i)
      r.toInt(n[i], r.loc(n[i], at), "a GEMM tile size", c.device.gemmTile[i], Range::Count);
  }

  /// The links of the alpha-beta collective model (perfmodel/Collectives.h).
  void parseNetwork(const YAML::Node &n, llvm::SMLoc at) {
    static const llvm::StringRef keys[] = {"nvlink_gbs", "nvlink_efficiency", "nics_per_node",
                                           "nic_gbs", "nic_efficiency"};
    YamlMap m(r, n, "network", keys, at);
    NetworkLinks &net = c.network;
    m.getReal("nvlink_gbs", net.nvlinkGBs, Need::Required, Range::Figure);
    m.getReal("nvlink_efficiency", net.nvlinkEfficiency, Need::Optional, Range::Fraction);
    bool nics = m.getInt("nics_per_node", net.nicsPerNode, Need::Optional, Range::Count);
    m.getReal("nic_gbs", net.nicGBs, Need::Optional, Range::Figure);
    m.getReal("nic_efficiency", net.nicEfficiency, Need::Optional, Range::Fraction);
    if (nics != (net.nicGBs > 0))
      r.error(m.loc(), "'network' needs both 'nics_per_node' and 'nic_gbs', or neither");
  }

  /// A shape key: comma-separated operands, each empty (a scalar) or
  /// positive dims joined by 'x', e.g. "8192x2048,2048x6144".
  static bool validShapeKey(llvm::StringRef s) {
    if (s.empty())
      return false;
    llvm::SmallVector<llvm::StringRef, 4> operands;
    s.split(operands, ',');
    for (llvm::StringRef op : operands) {
      if (op.empty())
        continue;
      llvm::SmallVector<llvm::StringRef, 4> dims;
      op.split(dims, 'x');
      for (llvm::StringRef dim : dims) {
        unsigned long long v = 0;
        if (dim.empty() || dim.getAsInteger(10, v) || v == 0)
          return false;
      }
    }
    return true;
  }

  void parseMeasured(const YAML::Node &n, llvm::SMLoc at) {
    if (!n.IsSequence()) {
      r.error(at, "expected a sequence of {op, shape, seconds} for 'measured'");
      return;
    }
    std::set<std::pair<std::string, std::string>> seen;
    for (const YAML::Node &e : n) {
      YamlMap m(r, e, "measured", {"op", "shape", "seconds"}, at);
      if (!m.valid())
        continue;
      MeasuredOp op;
      bool ok = m.getString("op", op.op, Need::Required);
      if (ok && !parseOpName(op.op)) {
        r.error(m.valueLoc("op"), "unknown op '" + op.op + "' in 'measured'");
        ok = false;
      }
      if (m.getString("shape", op.shape, Need::Required) && !validShapeKey(op.shape)) {
        r.error(m.valueLoc("shape"), "bad shape key '" + op.shape +
                                         "' (expected operand shapes such as 8192x2048,2048x6144)");
        ok = false;
      }
      ok &= m.getReal("seconds", op.seconds, Need::Required, Range::Positive);
      if (ok && !seen.insert({op.op, op.shape}).second) {
        r.error(m.loc(), "duplicate measured entry for '" + op.op + "' at shape " + op.shape);
        ok = false;
      }
      if (ok)
        c.device.measured.push_back(std::move(op));
    }
  }

  void parseCollectives(const YAML::Node &n, llvm::SMLoc at, bool shapeOk) {
    unsigned before = diag.errorCount();
    parseCollectiveEntries(n, at, shapeOk);
    collectiveErrors = diag.errorCount() != before;
  }

  void parseCollectiveEntries(const YAML::Node &n, llvm::SMLoc at, bool shapeOk) {
    if (!n.IsSequence()) {
      r.error(at, "expected a sequence of {nodes, gpus_per_node, bus_gbs, latency_us} for "
                  "'collectives'");
      return;
    }
    for (const YAML::Node &e : n) {
      YamlMap m(r, e, "collectives", {"nodes", "gpus_per_node", "bus_gbs", "latency_us"}, at);
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
        r.error(m.valueLoc("nodes"), "'nodes' must be at most " + std::to_string(maxNodes));
        continue;
      }
      if (l.nodes == 1 && l.gpusPerNode == 1) {
        r.error(m.loc(), "a collective entry needs a group of at least 2 GPUs");
        continue;
      }
      if (shapeOk && l.gpusPerNode > c.gpusPerNode) {
        r.error(m.valueLoc("gpus_per_node"),
                "collective entry has " + std::to_string(l.gpusPerNode) +
                    " GPUs per node but a node has " + std::to_string(c.gpusPerNode));
        continue;
      }
      bool dup = llvm::any_of(c.collectives, [&](const CollectiveLink &o) {
        return o.nodes == l.nodes && o.gpusPerNode == l.gpusPerNode;
      });
      if (dup) {
        r.error(m.loc(), "duplicate collective entry for " + std::to_string(l.nodes) +
                             " node(s) x " + std::to_string(l.gpusPerNode) + " GPU(s)");
        continue;
      }
      c.collectives.push_back(l);
    }
  }

  /// The table must describe groups inside a node and, on several nodes,
  /// groups that span nodes: lookups only extrapolate between entries.
  void checkCollectiveCoverage(YamlMap &m, int nodesOverride) {
    if (collectiveErrors)
      return; // some entries were bad; already reported
    if (c.network.present()) {
      // The network model covers every group; it needs NICs to span nodes.
      if (c.nodes > 1 && c.network.nicsPerNode == 0)
        r.error(m.keyLoc("network"), "'network' needs 'nics_per_node' and 'nic_gbs' for a "
                                     "cluster of " +
                                         std::to_string(c.nodes) + " nodes");
      return;
    }
    llvm::SMLoc at = m.has("collectives") ? m.keyLoc("collectives") : m.loc();
    if (c.gpusPerNode > 1 &&
        llvm::none_of(c.collectives, [](const CollectiveLink &l) { return l.nodes == 1; }))
      r.error(at, "'collectives' needs an entry inside one node (nodes: 1) for a node of " +
                      std::to_string(c.gpusPerNode) + " GPUs");
    if (c.nodes > 1 &&
        llvm::none_of(c.collectives, [](const CollectiveLink &l) { return l.nodes > 1; })) {
      std::string msg = "'collectives' needs an entry spanning several nodes for a cluster of " +
                        std::to_string(c.nodes) + " nodes";
      if (nodesOverride > 0)
        msg += " (--nodes " + std::to_string(nodesOverride) + ")";
      r.error(at, msg);
    }
  }

  void parseInterference(const YAML::Node &n, llvm::SMLoc at) {
    if (!n.IsSequence()) {
      r.error(at, "expected a sequence of {streams, factors} for 'interference'");
      return;
    }
    std::set<unsigned> seenMasks;
    for (const YAML::Node &e : n) {
      YamlMap m(r, e, "interference", {"streams", "factors"}, at);
      if (!m.valid())
        continue;
      InterferenceEntry entry;
      bool ok = true;
      unsigned mask = 0;
      if (auto s = m.get("streams", Need::Required)) {
        llvm::SMLoc sAt = m.valueLoc("streams");
        if (!s->IsSequence() || s->size() < 2 || s->size() > numStreams) {
          r.error(sAt, "'streams' must list 2 to 4 of compute, g2g, h2d, d2h");
          ok = false;
        } else {
          for (const YAML::Node &name : *s) {
            llvm::SMLoc nAt = r.loc(name, sAt);
            std::string text;
            if (!r.toString(name, nAt, "a stream", text)) {
              ok = false;
              continue;
            }
            auto stream = parseStreamName(text);
            if (!stream) {
              std::string msg = "unknown stream '" + text + "' (expected compute, g2g, h2d or d2h)";
              static const llvm::StringRef names[] = {"compute", "g2g", "h2d", "d2h"};
              if (auto close = closestMatch(text, names))
                msg += "; did you mean '" + *close + "'?";
              r.error(nAt, msg);
              ok = false;
              continue;
            }
            unsigned bit = 1u << static_cast<unsigned>(*stream);
            if (mask & bit) {
              r.error(nAt, "stream '" + text + "' is listed twice");
              ok = false;
              continue;
            }
            mask |= bit;
            entry.streams.push_back(*stream);
          }
        }
      } else {
        ok = false;
      }
      if (auto f = m.get("factors", Need::Required)) {
        llvm::SMLoc fAt = m.valueLoc("factors");
        if (!f->IsSequence()) {
          r.error(fAt, "expected a sequence of numbers for 'factors'");
          ok = false;
        } else {
          for (const YAML::Node &x : *f) {
            double v = 0;
            if (r.toReal(x, r.loc(x, fAt), "an interference factor", v, Range::AtLeastOne))
              entry.factors.push_back(v);
            else
              ok = false;
          }
          if (ok && entry.factors.size() != entry.streams.size()) {
            r.error(fAt, "expected " + std::to_string(entry.streams.size()) +
                             " factors (one per stream), found " +
                             std::to_string(entry.factors.size()));
            ok = false;
          }
        }
      } else {
        ok = false;
      }
      if (ok && !seenMasks.insert(mask).second) {
        r.error(m.loc(), "duplicate interference entry for this set of streams");
        ok = false;
      }
      if (ok)
        c.interference.push_back(std::move(entry));
    }
  }

  YamlReader r;
  DiagnosticEngine &diag;
  Cluster c;
  bool collectiveErrors = false;
};

bool looksLikePath(llvm::StringRef s) {
  return namesClusterFile(std::string_view(s.data(), s.size())) ||
         llvm::sys::fs::is_regular_file(s);
}

} // namespace

std::optional<Cluster> mist::loadCluster(unsigned bufferId, DiagnosticEngine &diag,
                                         int nodesOverride) {
  if (nodesOverride < 0) {
    diag.error({}, "--nodes must be positive");
    return std::nullopt;
  }
  ClusterParser p(bufferId, diag);
  try {
    return p.parse(nodesOverride);
  } catch (const YAML::Exception &e) {
    // Parsing proper is caught in YamlReader; this is a safety net for the
    // node accessors, which yaml-cpp documents as throwing too.
    diag.error(YamlReader(bufferId, diag).loc(e.mark), "invalid YAML: " + e.msg);
    return std::nullopt;
  }
}

std::vector<std::string> mist::listClusterPresets(llvm::ArrayRef<std::string> presetDirs) {
  std::set<std::string> names;
  for (const std::string &dir : presetDirs) {
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      llvm::StringRef file = llvm::sys::path::filename(it->path());
      if (file.endswith(".yaml"))
        names.insert(file.drop_back(5).str());
    }
  }
  return {names.begin(), names.end()};
}

std::optional<Cluster> mist::loadClusterByName(llvm::StringRef nameOrPath, int nodesOverride,
                                               llvm::ArrayRef<std::string> presetDirs,
                                               DiagnosticEngine &diag) {
  if (nameOrPath.empty()) {
    diag.error({}, "no cluster given (a preset name or a YAML file)");
    return std::nullopt;
  }
  std::string path;
  if (looksLikePath(nameOrPath)) {
    path = nameOrPath.str();
  } else {
    for (const std::string &dir : presetDirs) {
      llvm::SmallString<256> p(dir);
      llvm::sys::path::append(p, nameOrPath + ".yaml");
      if (llvm::sys::fs::is_regular_file(p)) {
        path = std::string(p);
        break;
      }
    }
    if (path.empty()) {
      std::vector<std::string> presets = listClusterPresets(presetDirs);
      std::string msg = "unknown cluster preset '" + nameOrPath.str() + "'";
      std::vector<llvm::StringRef> refs(presets.begin(), presets.end());
      if (auto close = closestMatch(nameOrPath, refs))
        msg += "; did you mean '" + *close + "'?";
      if (!presets.empty()) {
        msg += " (presets:";
        for (const std::string &p : presets)
          msg += " " + p;
        msg += ")";
      }
      diag.error({}, msg);
      return std::nullopt;
    }
  }
  auto buf = llvm::MemoryBuffer::getFile(path);
  if (!buf) {
    diag.error({}, "cannot read cluster file '" + path + "': " + buf.getError().message());
    return std::nullopt;
  }
  unsigned id = diag.sourceMgr().AddNewSourceBuffer(std::move(*buf), llvm::SMLoc());
  return loadCluster(id, diag, nodesOverride);
}
