//===- ClusterReader.cpp - Read a cluster file without yaml-cpp -----------===//
#include "format/ClusterReader.h"

#include "format/TextFile.h"
#include "format/YamlSubset.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>

namespace mist {

namespace {

struct Bad {
  int line;
  std::string what;
};

[[noreturn]] void fail(const YamlNode &n, const std::string &what) { throw Bad{n.line, what}; }

void expectKeys(const YamlNode &n, const char *where, const std::set<std::string> &known) {
  if (n.kind != YamlNode::Kind::Map)
    fail(n, std::string("expected a mapping for '") + where + "'");
  for (const auto &[k, v] : n.map)
    if (!known.count(k))
      fail(v, "unknown key '" + k + "' in '" + where + "'");
}

const YamlNode &required(const YamlNode &map, const std::string &key, const char *where) {
  const YamlNode *v = map.get(key);
  if (!v)
    fail(map, "missing key '" + key + "' in '" + where + "'");
  return *v;
}

/// The sequence at `n`, or a failure naming `what`.
const std::vector<YamlNode> &sequence(const YamlNode &n, const std::string &what) {
  if (n.kind != YamlNode::Kind::Seq)
    fail(n, "expected a sequence for '" + what + "'");
  return n.seq;
}

double real(const YamlNode &n, const std::string &what) {
  if (n.kind != YamlNode::Kind::Scalar || n.quoted || n.text.empty())
    fail(n, "expected a number for '" + what + "'");
  errno = 0;
  char *end = nullptr;
  double v = std::strtod(n.text.c_str(), &end);
  if (*end || errno || !std::isfinite(v))
    fail(n, "expected a number for '" + what + "', found '" + n.text + "'");
  return v;
}

int integer(const YamlNode &n, const std::string &what) {
  if (n.kind != YamlNode::Kind::Scalar || n.quoted || n.text.empty())
    fail(n, "expected an integer for '" + what + "'");
  errno = 0;
  char *end = nullptr;
  long v = std::strtol(n.text.c_str(), &end, 10);
  if (*end || errno || v < -(1L << 30) || v > (1L << 30))
    fail(n, "expected an integer for '" + what + "', found '" + n.text + "'");
  return static_cast<int>(v);
}

bool boolean(const YamlNode &n, const std::string &what) {
  if (n.kind == YamlNode::Kind::Scalar && !n.quoted && (n.text == "true" || n.text == "false"))
    return n.text == "true";
  fail(n, "expected true or false for '" + what + "'");
}

std::string string(const YamlNode &n, const std::string &what) {
  if (n.kind != YamlNode::Kind::Scalar)
    fail(n, "expected a string for '" + what + "'");
  return n.text;
}

Stream stream(const YamlNode &n) {
  std::string text = string(n, "streams");
  std::optional<Stream> s = parseStreamName(text);
  if (!s)
    fail(n, "unknown stream '" + text + "' (expected compute, g2g, h2d or d2h)");
  return *s;
}

void optionalReal(const YamlNode &map, const char *key, double &out) {
  if (const YamlNode *v = map.get(key))
    out = real(*v, key);
}

void readDevice(const YamlNode &d, DeviceProfile &p) {
  expectKeys(d, "device",
             {"name", "memory_gib", "usable_fraction", "peak_tflops", "tf32_peak_tflops",
              "matmul_efficiency", "mem_bandwidth_gbs", "mem_efficiency", "sms", "gemm_tile",
              "attention", "measured"});
  p.name = string(required(d, "name", "device"), "device.name");
  p.memoryGiB = real(required(d, "memory_gib", "device"), "memory_gib");
  optionalReal(d, "usable_fraction", p.usableFraction);
  p.peakTflops = real(required(d, "peak_tflops", "device"), "peak_tflops");
  optionalReal(d, "tf32_peak_tflops", p.tf32PeakTflops);
  optionalReal(d, "matmul_efficiency", p.matmulEfficiency);
  p.memBandwidthGBs = real(required(d, "mem_bandwidth_gbs", "device"), "mem_bandwidth_gbs");
  optionalReal(d, "mem_efficiency", p.memEfficiency);
  if (const YamlNode *sms = d.get("sms"))
    p.sms = integer(*sms, "sms");
  if (const YamlNode *tile = d.get("gemm_tile")) {
    const std::vector<YamlNode> &dims = sequence(*tile, "gemm_tile");
    if (dims.size() != 2)
      fail(*tile, "expected [rows, columns] for 'gemm_tile'");
    p.gemmTile = {integer(dims[0], "gemm_tile"), integer(dims[1], "gemm_tile")};
  }
  if (const YamlNode *a = d.get("attention")) {
    expectKeys(*a, "attention",
               {"fwd_efficiency", "fwd_half_keys", "bwd_efficiency", "bwd_half_keys"});
    p.attentionFwdEfficiency = real(required(*a, "fwd_efficiency", "attention"), "fwd_efficiency");
    p.attentionFwdHalfKeys = real(required(*a, "fwd_half_keys", "attention"), "fwd_half_keys");
    p.attentionBwdEfficiency = real(required(*a, "bwd_efficiency", "attention"), "bwd_efficiency");
    p.attentionBwdHalfKeys = real(required(*a, "bwd_half_keys", "attention"), "bwd_half_keys");
  }
  if (const YamlNode *m = d.get("measured"))
    for (const YamlNode &e : sequence(*m, "measured")) {
      expectKeys(e, "measured", {"op", "shape", "seconds"});
      p.measured.push_back({string(required(e, "op", "measured"), "op"),
                            string(required(e, "shape", "measured"), "shape"),
                            real(required(e, "seconds", "measured"), "seconds")});
    }
}

void readCollectives(const YamlNode &coll, std::vector<CollectiveLink> &out) {
  for (const YamlNode &e : sequence(coll, "collectives")) {
    expectKeys(e, "collectives", {"nodes", "gpus_per_node", "bus_gbs", "latency_us"});
    CollectiveLink f;
    f.nodes = integer(required(e, "nodes", "collectives"), "nodes");
    f.gpusPerNode = integer(required(e, "gpus_per_node", "collectives"), "gpus_per_node");
    f.busGBs = real(required(e, "bus_gbs", "collectives"), "bus_gbs");
    optionalReal(e, "latency_us", f.latencyUs);
    out.push_back(f);
  }
}

/// `network`: the links of the alpha-beta collective model.
void readNetwork(const YamlNode &n, NetworkLinks &net) {
  expectKeys(n, "network",
             {"nvlink_gbs", "nvlink_efficiency", "nics_per_node", "nic_gbs", "nic_efficiency"});
  net.nvlinkGBs = real(required(n, "nvlink_gbs", "network"), "nvlink_gbs");
  optionalReal(n, "nvlink_efficiency", net.nvlinkEfficiency);
  if (const YamlNode *nics = n.get("nics_per_node"))
    net.nicsPerNode = integer(*nics, "nics_per_node");
  optionalReal(n, "nic_gbs", net.nicGBs);
  optionalReal(n, "nic_efficiency", net.nicEfficiency);
}

/// `p2p` and `host`: the links between GPUs and to host memory.
void readLinks(const YamlNode &root, Cluster &c) {
  const YamlNode &p = required(root, "p2p", "cluster");
  expectKeys(p, "p2p", {"intra_gbs", "inter_gbs", "latency_us"});
  c.p2pIntraGBs = real(required(p, "intra_gbs", "p2p"), "intra_gbs");
  c.p2pInterGBs = real(required(p, "inter_gbs", "p2p"), "inter_gbs");
  optionalReal(p, "latency_us", c.p2pLatencyUs);

  const YamlNode &h = required(root, "host", "cluster");
  expectKeys(h, "host", {"h2d_gbs", "d2h_gbs", "latency_us", "memory_gib", "gpus_per_link"});
  c.h2dGBs = real(required(h, "h2d_gbs", "host"), "h2d_gbs");
  c.d2hGBs = real(required(h, "d2h_gbs", "host"), "d2h_gbs");
  optionalReal(h, "latency_us", c.hostLatencyUs);
  optionalReal(h, "memory_gib", c.hostMemoryGiB);
  if (const YamlNode *link = h.get("gpus_per_link"))
    c.gpusPerHostLink = integer(*link, "gpus_per_link");
}

void readInterference(const YamlNode &intf, std::vector<InterferenceEntry> &out) {
  for (const YamlNode &e : sequence(intf, "interference")) {
    expectKeys(e, "interference", {"streams", "factors"});
    InterferenceEntry f;
    const YamlNode &s = required(e, "streams", "interference");
    const YamlNode &x = required(e, "factors", "interference");
    if (s.kind != YamlNode::Kind::Seq || x.kind != YamlNode::Kind::Seq)
      fail(e, "expected sequences for 'streams' and 'factors'");
    for (const YamlNode &n : s.seq)
      f.streams.push_back(stream(n));
    for (const YamlNode &n : x.seq)
      f.factors.push_back(real(n, "factors"));
    out.push_back(std::move(f));
  }
}

void read(const YamlNode &root, Cluster &c) {
  expectKeys(root, "cluster",
             {"mist_cluster", "name", "nodes", "gpus_per_node", "tp_across_nodes", "device",
              "collectives", "network", "p2p", "host", "interference"});
  const YamlNode &version = required(root, "mist_cluster", "cluster");
  if (integer(version, "mist_cluster") != 1)
    fail(version, "unsupported cluster format version " + version.text);
  c.name = string(required(root, "name", "cluster"), "name");
  c.nodes = integer(required(root, "nodes", "cluster"), "nodes");
  c.gpusPerNode = integer(required(root, "gpus_per_node", "cluster"), "gpus_per_node");
  if (const YamlNode *t = root.get("tp_across_nodes"))
    c.tpAcrossNodes = boolean(*t, "tp_across_nodes");
  readDevice(required(root, "device", "cluster"), c.device);
  if (const YamlNode *coll = root.get("collectives"))
    readCollectives(*coll, c.collectives);
  if (const YamlNode *net = root.get("network"))
    readNetwork(*net, c.network);
  readLinks(root, c);
  if (const YamlNode *intf = root.get("interference"))
    readInterference(*intf, c.interference);
}

} // namespace

bool readClusterYaml(const std::string &text, Cluster &out, std::string &error) {
  YamlNode root;
  if (!parseYamlSubset(text, root, error))
    return false;
  Cluster c;
  try {
    read(root, c);
  } catch (const Bad &b) {
    error = "line " + std::to_string(b.line) + ": " + b.what;
    return false;
  }
  out = std::move(c);
  return true;
}

bool readClusterYamlFile(const std::string &path, Cluster &out, std::string &error) {
  return parseTextFile(path, error, [&](const std::string &text, std::string &why) {
    return readClusterYaml(text, out, why);
  });
}

} // namespace mist
