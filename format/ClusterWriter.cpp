//===- ClusterWriter.cpp - Write a cluster file without yaml-cpp ----------===//
#include "format/ClusterWriter.h"

#include "format/Streams.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>

namespace mist {

std::string yamlNumber(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string yamlString(const std::string &s) {
  // Plain only for text that cannot read back as anything else: letters,
  // digits and a few inner punctuation marks, not starting with a digit or
  // sign (numbers), not a YAML 1.1/1.2 boolean or null word.
  static const std::set<std::string> words = {
      "true", "false", "yes",  "no",   "on",    "off",  "null", "True", "False", "Yes", "No",
      "On",   "Off",   "Null", "TRUE", "FALSE", "NULL", "~",    "y",    "n",     "Y",   "N"};
  bool plain = !s.empty() && !words.count(s) && std::isalpha(static_cast<unsigned char>(s[0])) &&
               s.back() != ' ';
  for (char ch : s)
    plain &= std::isalnum(static_cast<unsigned char>(ch)) || ch == ' ' || ch == '_' || ch == '-' ||
             ch == '.' || ch == '(' || ch == ')' || ch == '/' || ch == '+';
  if (plain)
    return s;
  std::string q = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      q += '\\';
      q += ch;
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", static_cast<unsigned char>(ch));
      q += esc;
    } else {
      q += ch;
    }
  }
  return q + "\"";
}

namespace {

/// The messages of checkCluster, with the loader's range rules.
struct Problems {
  std::vector<std::string> bad;
  void positive(double v, const char *what) {
    if (!(v > 0) || !std::isfinite(v))
      bad.push_back(std::string(what) + " must be positive (is " + yamlNumber(v) + ")");
  }
  void fraction(double v, const char *what) {
    if (!(v > 0 && v <= 1))
      bad.push_back(std::string(what) + " must be in (0, 1] (is " + yamlNumber(v) + ")");
  }
  void nonNegative(double v, const char *what) {
    if (!(v >= 0) || !std::isfinite(v))
      bad.push_back(std::string(what) + " must not be negative (is " + yamlNumber(v) + ")");
  }
};

void checkShapeAndDevice(const Cluster &c, Problems &p) {
  if (c.name.empty())
    p.bad.push_back("name must not be empty");
  if (c.nodes < 1 || c.nodes > 65536)
    p.bad.push_back("nodes must be in 1..65536");
  if (c.gpusPerNode < 1 || c.gpusPerNode > 1024)
    p.bad.push_back("gpus_per_node must be in 1..1024");
  const DeviceProfile &d = c.device;
  if (d.name.empty())
    p.bad.push_back("device.name must not be empty");
  p.positive(d.memoryGiB, "device.memory_gib");
  p.fraction(d.usableFraction, "device.usable_fraction");
  p.positive(d.peakTflops, "device.peak_tflops");
  p.nonNegative(d.tf32PeakTflops, "device.tf32_peak_tflops");
  p.fraction(d.matmulEfficiency, "device.matmul_efficiency");
  p.positive(d.memBandwidthGBs, "device.mem_bandwidth_gbs");
  p.fraction(d.memEfficiency, "device.mem_efficiency");
  if (d.sms < 0 || d.gemmTile[0] < 1 || d.gemmTile[1] < 1)
    p.bad.push_back("device.sms must not be negative and device.gemm_tile must be positive");
  if (d.attentionFwdEfficiency > 0 || d.attentionBwdEfficiency > 0) {
    p.fraction(d.attentionFwdEfficiency, "device.attention.fwd_efficiency");
    p.fraction(d.attentionBwdEfficiency, "device.attention.bwd_efficiency");
    p.nonNegative(d.attentionFwdHalfKeys, "device.attention.fwd_half_keys");
    p.nonNegative(d.attentionBwdHalfKeys, "device.attention.bwd_half_keys");
  }
  std::set<std::pair<std::string, std::string>> seen;
  for (const MeasuredOp &m : d.measured) {
    if (m.op.empty() || m.shape.empty())
      p.bad.push_back("a measured entry needs an op and a shape");
    p.positive(m.seconds, "measured seconds");
    if (!seen.insert({m.op, m.shape}).second)
      p.bad.push_back("two measured entries for " + m.op + " at " + m.shape);
  }
}

/// Groups of 2+ GPUs that fit a node, each shape once, and entries inside a
/// node and across nodes where the cluster has several of either.
void checkCollectives(const Cluster &c, Problems &p) {
  const NetworkLinks &net = c.network;
  if (net.present()) {
    p.fraction(net.nvlinkEfficiency, "network.nvlink_efficiency");
    p.fraction(net.nicEfficiency, "network.nic_efficiency");
    if ((net.nicsPerNode > 0) != (net.nicGBs > 0))
      p.bad.push_back("network needs both nics_per_node and nic_gbs, or neither");
    if (c.nodes > 1 && net.nicsPerNode < 1)
      p.bad.push_back("network: several nodes need nics_per_node and nic_gbs");
  }
  std::set<std::pair<int, int>> shapes;
  bool inside = false, across = false;
  for (const CollectiveLink &e : c.collectives) {
    if (e.nodes < 1 || e.gpusPerNode < 1 || (e.nodes == 1 && e.gpusPerNode == 1))
      p.bad.push_back("a collective entry needs a group of at least 2 GPUs");
    if (e.gpusPerNode > c.gpusPerNode)
      p.bad.push_back("a collective entry has more GPUs per node than a node");
    if (!shapes.insert({e.nodes, e.gpusPerNode}).second)
      p.bad.push_back("two collective entries for " + std::to_string(e.nodes) + " x " +
                      std::to_string(e.gpusPerNode));
    p.positive(e.busGBs, "collectives bus_gbs");
    p.nonNegative(e.latencyUs, "collectives latency_us");
    inside |= e.nodes == 1;
    across |= e.nodes > 1;
  }
  if (net.present())
    return; // the network model covers every group
  if (c.gpusPerNode > 1 && !inside)
    p.bad.push_back("collectives: a node of several GPUs needs an entry inside one node");
  if (c.nodes > 1 && !across)
    p.bad.push_back("collectives: several nodes need an entry spanning nodes");
}

void checkLinks(const Cluster &c, Problems &p) {
  p.positive(c.p2pIntraGBs, "p2p.intra_gbs");
  p.positive(c.p2pInterGBs, "p2p.inter_gbs");
  p.nonNegative(c.p2pLatencyUs, "p2p.latency_us");
  p.positive(c.h2dGBs, "host.h2d_gbs");
  p.positive(c.d2hGBs, "host.d2h_gbs");
  p.nonNegative(c.hostLatencyUs, "host.latency_us");
  p.nonNegative(c.hostMemoryGiB, "host.memory_gib");
  if (c.gpusPerHostLink < 1)
    p.bad.push_back("host.gpus_per_link must be at least 1");
}

/// 2 to 4 distinct streams, one factor of at least 1 each, each set once.
void checkInterference(const Cluster &c, Problems &p) {
  std::set<std::set<Stream>> sets;
  for (const InterferenceEntry &e : c.interference) {
    std::set<Stream> s(e.streams.begin(), e.streams.end());
    if (e.streams.size() < 2 || e.streams.size() > 4 || s.size() != e.streams.size())
      p.bad.push_back("an interference entry needs 2 to 4 distinct streams");
    for (Stream st : e.streams)
      if (static_cast<unsigned>(st) >= numStreams)
        p.bad.push_back("unknown stream " + std::to_string(static_cast<unsigned>(st)));
    if (e.factors.size() != e.streams.size())
      p.bad.push_back("an interference entry needs one factor per stream");
    for (double f : e.factors)
      if (!(f >= 1) || !std::isfinite(f))
        p.bad.push_back("interference factors must be at least 1 (is " + yamlNumber(f) + ")");
    if (!sets.insert(s).second)
      p.bad.push_back("two interference entries for the same streams");
  }
}

void writeDevice(const DeviceProfile &d, std::ostream &os) {
  os << "device:\n";
  os << "  name: " << yamlString(d.name) << "\n";
  os << "  memory_gib: " << yamlNumber(d.memoryGiB) << "\n";
  os << "  usable_fraction: " << yamlNumber(d.usableFraction) << "\n";
  os << "  peak_tflops: " << yamlNumber(d.peakTflops) << "\n";
  if (d.tf32PeakTflops > 0)
    os << "  tf32_peak_tflops: " << yamlNumber(d.tf32PeakTflops) << "\n";
  os << "  matmul_efficiency: " << yamlNumber(d.matmulEfficiency) << "\n";
  os << "  mem_bandwidth_gbs: " << yamlNumber(d.memBandwidthGBs) << "\n";
  os << "  mem_efficiency: " << yamlNumber(d.memEfficiency) << "\n";
  if (d.sms > 0) {
    os << "  sms: " << d.sms << "\n";
    os << "  gemm_tile: [" << d.gemmTile[0] << ", " << d.gemmTile[1] << "]\n";
  }
  if (d.attentionFwdEfficiency > 0)
    os << "  attention: {fwd_efficiency: " << yamlNumber(d.attentionFwdEfficiency)
       << ", fwd_half_keys: " << yamlNumber(d.attentionFwdHalfKeys)
       << ", bwd_efficiency: " << yamlNumber(d.attentionBwdEfficiency)
       << ", bwd_half_keys: " << yamlNumber(d.attentionBwdHalfKeys) << "}\n";
  if (!d.measured.empty()) {
    os << "  measured:\n";
    for (const MeasuredOp &m : d.measured)
      os << "    - {op: " << yamlString(m.op) << ", shape: \"" << m.shape
         << "\", seconds: " << yamlNumber(m.seconds) << "}\n";
  }
}

void writeInterference(const std::vector<InterferenceEntry> &table, std::ostream &os) {
  if (table.empty())
    return;
  os << "interference:\n";
  for (const InterferenceEntry &e : table) {
    os << "  - {streams: [";
    for (size_t i = 0; i < e.streams.size(); ++i)
      os << (i ? ", " : "") << streamName(e.streams[i]);
    os << "], factors: [";
    for (size_t i = 0; i < e.factors.size(); ++i)
      os << (i ? ", " : "") << yamlNumber(e.factors[i]);
    os << "]}\n";
  }
}

} // namespace

std::vector<std::string> checkCluster(const Cluster &c) {
  Problems p;
  checkShapeAndDevice(c, p);
  checkCollectives(c, p);
  checkLinks(c, p);
  checkInterference(c, p);
  return p.bad;
}

void writeClusterYaml(const Cluster &c, const std::vector<std::string> &comment, std::ostream &os) {
  for (const std::string &line : comment)
    os << (line.empty() ? "#" : "# " + line) << "\n";
  os << "mist_cluster: 1\n";
  os << "name: " << yamlString(c.name) << "\n";
  os << "nodes: " << c.nodes << "\n";
  os << "gpus_per_node: " << c.gpusPerNode << "\n";
  os << "tp_across_nodes: " << (c.tpAcrossNodes ? "true" : "false") << "\n";
  writeDevice(c.device, os);
  if (!c.collectives.empty()) {
    os << "collectives:\n";
    for (const CollectiveLink &e : c.collectives)
      os << "  - {nodes: " << e.nodes << ", gpus_per_node: " << e.gpusPerNode
         << ", bus_gbs: " << yamlNumber(e.busGBs) << ", latency_us: " << yamlNumber(e.latencyUs)
         << "}\n";
  }
  if (c.network.present()) {
    const NetworkLinks &n = c.network;
    os << "network: {nvlink_gbs: " << yamlNumber(n.nvlinkGBs)
       << ", nvlink_efficiency: " << yamlNumber(n.nvlinkEfficiency);
    if (n.nicsPerNode > 0)
      os << ", nics_per_node: " << n.nicsPerNode << ", nic_gbs: " << yamlNumber(n.nicGBs)
         << ", nic_efficiency: " << yamlNumber(n.nicEfficiency);
    os << "}\n";
  }
  os << "p2p: {intra_gbs: " << yamlNumber(c.p2pIntraGBs)
     << ", inter_gbs: " << yamlNumber(c.p2pInterGBs)
     << ", latency_us: " << yamlNumber(c.p2pLatencyUs) << "}\n";
  os << "host: {h2d_gbs: " << yamlNumber(c.h2dGBs) << ", d2h_gbs: " << yamlNumber(c.d2hGBs)
     << ", latency_us: " << yamlNumber(c.hostLatencyUs);
  if (c.hostMemoryGiB > 0)
    os << ", memory_gib: " << yamlNumber(c.hostMemoryGiB);
  if (c.gpusPerHostLink > 1)
    os << ", gpus_per_link: " << c.gpusPerHostLink;
  os << "}\n";
  writeInterference(c.interference, os);
}

} // namespace mist
