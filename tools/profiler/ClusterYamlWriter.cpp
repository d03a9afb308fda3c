//===- ClusterYamlWriter.cpp - Write a cluster file without yaml-cpp ------===//
#include "tools/profiler/ClusterYamlWriter.h"

#include "format/Streams.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>

namespace mist::profiler {

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

std::vector<std::string> checkClusterFigures(const ClusterFigures &c) {
  std::vector<std::string> bad;
  auto positive = [&](double v, const char *what) {
    if (!(v > 0) || !std::isfinite(v))
      bad.push_back(std::string(what) + " must be positive (is " + yamlNumber(v) + ")");
  };
  auto fraction = [&](double v, const char *what) {
    if (!(v > 0 && v <= 1))
      bad.push_back(std::string(what) + " must be in (0, 1] (is " + yamlNumber(v) + ")");
  };
  auto nonNegative = [&](double v, const char *what) {
    if (!(v >= 0) || !std::isfinite(v))
      bad.push_back(std::string(what) + " must not be negative (is " + yamlNumber(v) + ")");
  };
  if (c.name.empty())
    bad.push_back("name must not be empty");
  if (c.nodes < 1 || c.nodes > 65536)
    bad.push_back("nodes must be in 1..65536");
  if (c.gpusPerNode < 1 || c.gpusPerNode > 1024)
    bad.push_back("gpus_per_node must be in 1..1024");
  if (c.deviceName.empty())
    bad.push_back("device.name must not be empty");
  positive(c.memoryGiB, "device.memory_gib");
  fraction(c.usableFraction, "device.usable_fraction");
  positive(c.peakTflops, "device.peak_tflops");
  nonNegative(c.tf32PeakTflops, "device.tf32_peak_tflops");
  fraction(c.matmulEfficiency, "device.matmul_efficiency");
  positive(c.memBandwidthGBs, "device.mem_bandwidth_gbs");
  fraction(c.memEfficiency, "device.mem_efficiency");
  std::set<std::pair<std::string, std::string>> seen;
  for (const MeasuredOpFigure &m : c.measured) {
    if (m.op.empty() || m.shape.empty())
      bad.push_back("a measured entry needs an op and a shape");
    positive(m.seconds, "measured seconds");
    if (!seen.insert({m.op, m.shape}).second)
      bad.push_back("two measured entries for " + m.op + " at " + m.shape);
  }
  std::set<std::pair<int, int>> shapes;
  bool inside = false, across = false;
  for (const CollectiveFigure &e : c.collectives) {
    if (e.nodes < 1 || e.gpusPerNode < 1 || (e.nodes == 1 && e.gpusPerNode == 1))
      bad.push_back("a collective entry needs a group of at least 2 GPUs");
    if (e.gpusPerNode > c.gpusPerNode)
      bad.push_back("a collective entry has more GPUs per node than a node");
    if (!shapes.insert({e.nodes, e.gpusPerNode}).second)
      bad.push_back("two collective entries for " + std::to_string(e.nodes) + " x " +
                    std::to_string(e.gpusPerNode));
    positive(e.busGBs, "collectives bus_gbs");
    nonNegative(e.latencyUs, "collectives latency_us");
    inside |= e.nodes == 1;
    across |= e.nodes > 1;
  }
  if (c.gpusPerNode > 1 && !inside)
    bad.push_back("collectives: a node of several GPUs needs an entry inside one node");
  if (c.nodes > 1 && !across)
    bad.push_back("collectives: several nodes need an entry spanning nodes");
  positive(c.p2pIntraGBs, "p2p.intra_gbs");
  positive(c.p2pInterGBs, "p2p.inter_gbs");
  nonNegative(c.p2pLatencyUs, "p2p.latency_us");
  positive(c.h2dGBs, "host.h2d_gbs");
  positive(c.d2hGBs, "host.d2h_gbs");
  nonNegative(c.hostLatencyUs, "host.latency_us");
  nonNegative(c.hostMemoryGiB, "host.memory_gib");
  std::set<std::set<std::string>> sets;
  for (const InterferenceFigure &e : c.interference) {
    std::set<std::string> s(e.streams.begin(), e.streams.end());
    if (e.streams.size() < 2 || e.streams.size() > 4 || s.size() != e.streams.size())
      bad.push_back("an interference entry needs 2 to 4 distinct streams");
    for (const std::string &n : e.streams)
      if (!parseStreamName(n))
        bad.push_back("unknown stream '" + n + "'");
    if (e.factors.size() != e.streams.size())
      bad.push_back("an interference entry needs one factor per stream");
    for (double f : e.factors)
      if (!(f >= 1) || !std::isfinite(f))
        bad.push_back("interference factors must be at least 1 (is " + yamlNumber(f) + ")");
    if (!sets.insert(s).second)
      bad.push_back("two interference entries for the same streams");
  }
  return bad;
}

void writeClusterYaml(const ClusterFigures &c, const std::vector<std::string> &comment,
                      std::ostream &os) {
  for (const std::string &line : comment)
    os << (line.empty() ? "#" : "# " + line) << "\n";
  os << "mist_cluster: 1\n";
  os << "name: " << yamlString(c.name) << "\n";
  os << "nodes: " << c.nodes << "\n";
  os << "gpus_per_node: " << c.gpusPerNode << "\n";
  os << "tp_across_nodes: " << (c.tpAcrossNodes ? "true" : "false") << "\n";
  os << "device:\n";
  os << "  name: " << yamlString(c.deviceName) << "\n";
  os << "  memory_gib: " << yamlNumber(c.memoryGiB) << "\n";
  os << "  usable_fraction: " << yamlNumber(c.usableFraction) << "\n";
  os << "  peak_tflops: " << yamlNumber(c.peakTflops) << "\n";
  if (c.tf32PeakTflops > 0)
    os << "  tf32_peak_tflops: " << yamlNumber(c.tf32PeakTflops) << "\n";
  os << "  matmul_efficiency: " << yamlNumber(c.matmulEfficiency) << "\n";
  os << "  mem_bandwidth_gbs: " << yamlNumber(c.memBandwidthGBs) << "\n";
  os << "  mem_efficiency: " << yamlNumber(c.memEfficiency) << "\n";
  if (!c.measured.empty()) {
    os << "  measured:\n";
    for (const MeasuredOpFigure &m : c.measured)
      os << "    - {op: " << yamlString(m.op) << ", shape: \"" << m.shape
         << "\", seconds: " << yamlNumber(m.seconds) << "}\n";
  }
  if (!c.collectives.empty()) {
    os << "collectives:\n";
    for (const CollectiveFigure &e : c.collectives)
      os << "  - {nodes: " << e.nodes << ", gpus_per_node: " << e.gpusPerNode
         << ", bus_gbs: " << yamlNumber(e.busGBs) << ", latency_us: " << yamlNumber(e.latencyUs)
         << "}\n";
  }
  os << "p2p: {intra_gbs: " << yamlNumber(c.p2pIntraGBs)
     << ", inter_gbs: " << yamlNumber(c.p2pInterGBs)
     << ", latency_us: " << yamlNumber(c.p2pLatencyUs) << "}\n";
  os << "host: {h2d_gbs: " << yamlNumber(c.h2dGBs) << ", d2h_gbs: " << yamlNumber(c.d2hGBs)
     << ", latency_us: " << yamlNumber(c.hostLatencyUs);
  if (c.hostMemoryGiB > 0)
    os << ", memory_gib: " << yamlNumber(c.hostMemoryGiB);
  os << "}\n";
  if (!c.interference.empty()) {
    os << "interference:\n";
    for (const InterferenceFigure &e : c.interference) {
      os << "  - {streams: [";
      for (size_t i = 0; i < e.streams.size(); ++i)
        os << (i ? ", " : "") << e.streams[i];
      os << "], factors: [";
      for (size_t i = 0; i < e.factors.size(); ++i)
        os << (i ? ", " : "") << yamlNumber(e.factors[i]);
      os << "]}\n";
    }
  }
}

} // namespace mist::profiler
