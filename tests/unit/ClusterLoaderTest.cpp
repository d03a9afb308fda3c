//===- ClusterLoaderTest.cpp - Cluster files, presets, table lookup -------===//
#include "yaml/ClusterLoader.h"
#include "SourceDiagnostics.h"
#include "perfmodel/ClusterLinks.h"
#include "perfmodel/Collectives.h"
#include "yaml/HostCluster.h"
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

using namespace mist;

namespace {

/// What the loader reported, and the cluster it loaded.
struct Loaded : test::SourceDiagnostics {
  std::optional<Cluster> cluster;
};

std::unique_ptr<Loaded> loadText(const std::string &text, int nodes = 0) {
  auto l = std::make_unique<Loaded>();
  unsigned id = l->addBuffer(text, "test.yaml");
  l->cluster = loadCluster(id, l->diag, nodes);
  return l;
}

std::unique_ptr<Loaded> loadPreset(const std::string &name, int nodes = 0) {
  auto l = std::make_unique<Loaded>();
  std::vector<std::string> dirs = {MIST_CLUSTER_DIR};
  l->cluster = loadClusterByName(name, nodes, dirs, l->diag);
  return l;
}

/// A small valid cluster; tests break one line of it at a time.
const char *baseCluster = R"(mist_cluster: 1
name: test
nodes: 1
gpus_per_node: 4
device:
  name: GPU
  memory_gib: 16
  peak_tflops: 100
  mem_bandwidth_gbs: 1000
collectives:
  - {nodes: 1, gpus_per_node: 2, bus_gbs: 50, latency_us: 5}
  - {nodes: 1, gpus_per_node: 4, bus_gbs: 80}
  - {nodes: 2, gpus_per_node: 4, bus_gbs: 10, latency_us: 20}
p2p: {intra_gbs: 50, inter_gbs: 10}
host: {h2d_gbs: 20, d2h_gbs: 20, latency_us: 3}
interference:
  - {streams: [compute, g2g], factors: [1.1, 1.2]}
)";

std::string replaced(std::string text, const std::string &from, const std::string &to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos)
    text.replace(at, from.size(), to);
  return text;
}

/// Loads `text`, expects it to fail with `message` at `line:col`.
void expectError(const std::string &text, const std::string &lineCol, const std::string &message,
                 int nodes = 0) {
  auto l = loadText(text, nodes);
  EXPECT_FALSE(l->cluster);
  EXPECT_NE(l->errors().find("test.yaml:" + lineCol + ": error: " + message), std::string::npos)
      << "expected '" << message << "' at " << lineCol << ", got:\n"
      << l->errors();
}

} // namespace

TEST(ClusterLoader, BaseClusterLoadsWithDefaults) {
  auto l = loadText(baseCluster);
  ASSERT_TRUE(l->cluster) << l->errors();
  const Cluster &c = *l->cluster;
  EXPECT_EQ(c.name, "test");
  EXPECT_EQ(c.totalGpus(), 4);
  EXPECT_FALSE(c.tpAcrossNodes);
  EXPECT_DOUBLE_EQ(c.device.usableFraction, 0.92);
  EXPECT_DOUBLE_EQ(c.device.matmulEfficiency, 0.75);
  EXPECT_DOUBLE_EQ(c.device.memEfficiency, 0.8);
  // No TF32 peak given: fp32 training's GEMMs run at half the bf16 peak.
  EXPECT_DOUBLE_EQ(c.device.matmulPeakTflops(false), 100);
  EXPECT_DOUBLE_EQ(c.device.matmulPeakTflops(true), 50);
  ASSERT_EQ(c.collectives.size(), 3u);
  EXPECT_DOUBLE_EQ(c.collectives[1].latencyUs, 0);
  EXPECT_DOUBLE_EQ(c.p2pLatencyUs, 0);
  EXPECT_DOUBLE_EQ(c.hostLatencyUs, 3);
  ASSERT_EQ(c.interference.size(), 1u);
  EXPECT_EQ(c.interference[0].streams, (std::vector<Stream>{Stream::Compute, Stream::G2G}));
  EXPECT_EQ(c.interference[0].factors, (std::vector<double>{1.1, 1.2}));
}

TEST(ClusterLoader, EveryPresetLoads) {
  std::vector<std::string> dirs = {MIST_CLUSTER_DIR};
  std::vector<std::string> presets = listClusterPresets(dirs);
  EXPECT_EQ(presets, (std::vector<std::string>{"a100-40g", "a100-80g", "dgx-a100-40g",
                                               "dgx-a100-80g", "dgx-h100-80g", "dgx-h200-141g",
                                               "h100-80g", "host", "l4-24g"}));
  for (const std::string &name : presets) {
    if (name == hostClusterName)
      continue; // fitted to the machine: HostPresetIsThisMachine
    auto l = loadPreset(name);
    ASSERT_TRUE(l->cluster) << name << ":\n" << l->errors();
    const Cluster &c = *l->cluster;
    EXPECT_EQ(c.name, name);
    EXPECT_EQ(c.nodes, 1) << name;
    EXPECT_EQ(c.gpusPerNode, 8) << name;
    EXPECT_EQ(c.interference.size(), 11u) << name; // every subset of 2 to 4 streams
    for (int nodes : {2, 4, 8})
      for (int gpn : {1, 2, 4, 8})
        EXPECT_GT(groupBusGBs(c, nodes, gpn), 0) << name;
    // Multi-node groups are never faster than the same group inside a node.
    EXPECT_LE(groupBusGBs(c, 2, 8), groupBusGBs(c, 1, 8)) << name;
  }
}

TEST(ClusterLoader, HostPresetIsThisMachine) {
  auto l = loadPreset(hostClusterName);
  ASSERT_TRUE(l->cluster) << l->errors();
  const Cluster &c = *l->cluster;
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  EXPECT_EQ(c.nodes, 1);
  EXPECT_EQ(c.gpusPerNode, CPU_COUNT(&set));
  const double memory = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE)) /
                        double(1ull << 30) / CPU_COUNT(&set);
  EXPECT_NEAR(c.device.memoryGiB, memory, 1e-9);
  if (c.gpusPerNode >= 2) { // the measured pair's rates, for a group of every core
    ASSERT_EQ(c.collectives.size(), 1u);
    EXPECT_EQ(c.collectives[0].gpusPerNode, c.gpusPerNode);
    EXPECT_DOUBLE_EQ(c.collectives[0].busGBs, 3.78);
  }
  // As a file (not by the preset's name) it is what it says.
  auto asFile = loadPreset(std::string(MIST_CLUSTER_DIR) + "/host.yaml");
  ASSERT_TRUE(asFile->cluster);
  EXPECT_EQ(asFile->cluster->gpusPerNode, 2);
}

TEST(ClusterLoader, PresetFigures) {
  auto h100 = loadPreset("h100-80g");
  ASSERT_TRUE(h100->cluster) << h100->errors();
  EXPECT_DOUBLE_EQ(h100->cluster->device.peakTflops, 989);
  EXPECT_DOUBLE_EQ(h100->cluster->device.matmulEfficiency, 0.70);
  EXPECT_DOUBLE_EQ(h100->cluster->device.matmulPeakTflops(true), 495);
  EXPECT_DOUBLE_EQ(h100->cluster->h2dGBs, 54.9);
  EXPECT_DOUBLE_EQ(h100->cluster->d2hGBs, 51.2);
  auto a100 = loadPreset("a100-40g");
  ASSERT_TRUE(a100->cluster);
  EXPECT_DOUBLE_EQ(a100->cluster->device.memoryGiB, 40);
  EXPECT_DOUBLE_EQ(collectiveBusGBs(*a100->cluster, 1, 4), 193);
  EXPECT_DOUBLE_EQ(collectiveBusGBs(*a100->cluster, 2, 8), 10.7);
  auto l4 = loadPreset("l4-24g");
  ASSERT_TRUE(l4->cluster);
  EXPECT_DOUBLE_EQ(l4->cluster->device.peakTflops, 121);
  EXPECT_DOUBLE_EQ(l4->cluster->device.memBandwidthGBs, 300);
  EXPECT_DOUBLE_EQ(collectiveBusGBs(*l4->cluster, 1, 8), 4.7);
}

TEST(ClusterLoader, LoadsByPath) {
  auto l = loadPreset(std::string(MIST_CLUSTER_DIR) + "/a100-80g.yaml");
  ASSERT_TRUE(l->cluster) << l->errors();
  EXPECT_DOUBLE_EQ(l->cluster->device.memBandwidthGBs, 2039);
}

TEST(ClusterLoader, NodesOverride) {
  auto one = loadPreset("a100-40g");
  auto four = loadPreset("a100-40g", 4);
  ASSERT_TRUE(one->cluster && four->cluster) << four->errors();
  EXPECT_EQ(four->cluster->nodes, 4);
  EXPECT_EQ(four->cluster->totalGpus(), 32);
  // The table keeps its meaning: entries are not rescaled.
  ASSERT_EQ(one->cluster->collectives.size(), four->cluster->collectives.size());
  for (size_t i = 0; i < one->cluster->collectives.size(); ++i) {
    EXPECT_EQ(one->cluster->collectives[i].nodes, four->cluster->collectives[i].nodes);
    EXPECT_EQ(one->cluster->collectives[i].busGBs, four->cluster->collectives[i].busGBs);
  }
  auto h100 = loadPreset("h100-80g", 4);
  ASSERT_TRUE(h100->cluster);
  EXPECT_DOUBLE_EQ(collectiveBusGBs(*h100->cluster, 4, 8), 315);
  EXPECT_DOUBLE_EQ(collectiveLatencyUs(*h100->cluster, 4, 8), 35);
}

TEST(ClusterLoader, NodesOverrideNeedsMultiNodeEntries) {
  std::string text =
      replaced(baseCluster, "  - {nodes: 2, gpus_per_node: 4, bus_gbs: 10, latency_us: 20}\n", "");
  EXPECT_TRUE(loadText(text)->cluster);
  expectError(text, "10:1",
              "'collectives' needs an entry spanning several nodes for a cluster "
              "of 3 nodes (--nodes 3)",
              3);
  auto neg = loadText(baseCluster, -1);
  EXPECT_FALSE(neg->cluster);
  EXPECT_NE(neg->errors().find("--nodes must be positive"), std::string::npos);
}

TEST(ClusterLoader, CollectiveLookupRule) {
  Cluster c;
  c.nodes = 2;
  c.gpusPerNode = 8;
  c.collectives = {{1, 2, 100, 5}, {1, 8, 200, 6}, {2, 1, 10, 20}, {2, 4, 40, 25}};
  // 1: exact hits.
  EXPECT_EQ(collectiveBusGBs(c, 1, 2), 100);
  EXPECT_EQ(collectiveLatencyUs(c, 1, 2), 5);
  EXPECT_EQ(collectiveBusGBs(c, 1, 8), 200);
  EXPECT_EQ(collectiveBusGBs(c, 2, 4), 40);
  // 2: same node span, nearest gpusPerNode below, as is.
  EXPECT_EQ(collectiveBusGBs(c, 1, 4), 100);
  EXPECT_EQ(collectiveLatencyUs(c, 1, 4), 5);
  EXPECT_EQ(collectiveBusGBs(c, 2, 2), 10);
  EXPECT_EQ(collectiveBusGBs(c, 2, 8), 40);
  // 3: more nodes than any entry: the widest span below, latency scaled.
  EXPECT_EQ(collectiveBusGBs(c, 4, 4), 40);
  EXPECT_EQ(collectiveLatencyUs(c, 4, 4), 50);
  EXPECT_EQ(collectiveBusGBs(c, 3, 1), 10);
  EXPECT_EQ(collectiveLatencyUs(c, 3, 1), 30);
  // 3: fewer GPUs per node than any entry of the span: bandwidth scaled down.
  EXPECT_EQ(collectiveBusGBs(c, 1, 1), 50);
  Cluster wide;
  wide.collectives = {{2, 4, 40, 25}, {4, 4, 30, 40}};
  EXPECT_EQ(collectiveBusGBs(wide, 1, 4), 40); // no entry spans 1 node: the fewest nodes
  EXPECT_EQ(collectiveLatencyUs(wide, 1, 4), 25);
  EXPECT_EQ(collectiveBusGBs(wide, 2, 2), 20);
  EXPECT_EQ(collectiveBusGBs(wide, 3, 4), 40);
  EXPECT_EQ(collectiveBusGBs(wide, 8, 8), 30);
  EXPECT_EQ(collectiveLatencyUs(wide, 8, 8), 80);
  Cluster none;
  EXPECT_EQ(collectiveBusGBs(none, 2, 8), 0);
  EXPECT_EQ(collectiveLatencyUs(none, 2, 8), 0);
}

TEST(ClusterLoader, StreamNames) {
  for (unsigned i = 0; i < numStreams; ++i)
    EXPECT_EQ(parseStreamName(streamName(static_cast<Stream>(i))), static_cast<Stream>(i));
  EXPECT_EQ(parseStreamName("gpu"), std::nullopt);
}

TEST(ClusterLoader, RejectsBadFiles) {
  expectError(replaced(baseCluster, "  peak_tflops: 100", "  peak_tflop: 100"), "8:3",
              "unknown key 'peak_tflop' in 'device'; did you mean 'peak_tflops'?");
  expectError(replaced(baseCluster, "  peak_tflops: 100", "  peak_tflop: 100"), "6:3",
              "missing key 'peak_tflops' in 'device'");
  expectError(
      replaced(baseCluster, "  peak_tflops: 100", "  peak_tflops: 100\n  tf32_peak_tflops: 0"),
      "9:21", "'tf32_peak_tflops' must be between 1e-06 and 1e+09");
  expectError(replaced(baseCluster, "memory_gib: 16", "memory_gib: -16"), "7:15",
              "'memory_gib' must be between 1e-06 and 1e+09");
  expectError(replaced(baseCluster, "memory_gib: 16", "memory_gib: lots"), "7:15",
              "expected a number for 'memory_gib', found 'lots'");
  expectError(replaced(baseCluster, "memory_gib: 16", "memory_gib: \"16\""), "7:15",
              "expected a number for 'memory_gib', found '16'");
  expectError(replaced(baseCluster, "  mem_bandwidth_gbs: 1000",
                       "  mem_bandwidth_gbs: 1000\n  usable_fraction: 1.5"),
              "10:20", "'usable_fraction' must be in (0, 1]");
  expectError(replaced(baseCluster, "[compute, g2g]", "[compute, gpu]"), "17:25",
              "unknown stream 'gpu' (expected compute, g2g, h2d or d2h)\n");
  expectError(replaced(baseCluster, "[compute, g2g]", "[comput, g2g]"), "17:16",
              "unknown stream 'comput' (expected compute, g2g, h2d or d2h); did you mean "
              "'compute'?");
  expectError(replaced(baseCluster, "factors: [1.1, 1.2]", "factors: [1.1]"), "17:40",
              "expected 2 factors (one per stream), found 1");
  expectError(replaced(baseCluster, "factors: [1.1, 1.2]", "factors: [1.1, 0.9]"), "17:46",
              "an interference factor must be at least 1");
  expectError(replaced(baseCluster, "[compute, g2g]", "[g2g, g2g]"), "17:21",
              "stream 'g2g' is listed twice");
  expectError(replaced(baseCluster, "nodes: 1\n", "nodes: 0\n"), "3:8",
              "'nodes' must be at least 1");
  expectError(replaced(baseCluster, "nodes: 1\n", "nodes: 2.5\n"), "3:8",
              "expected an integer for 'nodes', found '2.5'");
  expectError(
      replaced(baseCluster, "{nodes: 1, gpus_per_node: 2,", "{nodes: 1, gpus_per_node: 16,"),
      "11:31", "collective entry has 16 GPUs per node but a node has 4");
  expectError(replaced(baseCluster, "{nodes: 1, gpus_per_node: 2,", "{nodes: 1, gpus_per_node: 4,"),
              "12:5", "duplicate collective entry for 1 node(s) x 4 GPU(s)");
  expectError(replaced(baseCluster, "mist_cluster: 1", "mist_cluster: 2"), "1:15",
              "unsupported cluster format version 2 (this mistc reads 1)");
  expectError(replaced(baseCluster, "name: test\n", "name: test\nname: again\n"), "3:1",
              "duplicate key 'name'");
  expectError(replaced(baseCluster, "p2p: {intra_gbs: 50,", "p2p: {intra_gbs: [50],"), "14:18",
              "expected a number for 'intra_gbs', found a sequence");
  expectError(replaced(baseCluster, "host: {h2d_gbs: 20,", "host: {h2d_gbs: 20"), "15:27",
              "expected ',' or '}' in a flow mapping");
  expectError("- 1\n- 2\n", "1:1",
              "expected a cluster description (a YAML mapping), found a "
              "sequence");
  expectError("", "1:1", "expected a cluster description (a YAML mapping), found nothing");
  expectError(std::string(baseCluster) + "---\nname: two\n", "18:1",
              "a file holds one YAML document, found a second");
  // A trailing marker, or one followed by comments only, starts no document.
  EXPECT_TRUE(loadText(std::string(baseCluster) + "---\n# nothing\n...\n")->cluster)
      << "an empty second document is harmless";
}

TEST(ClusterLoader, NullValueIsLocatedAtItsKey) {
  expectError(replaced(baseCluster, "memory_gib: 16", "memory_gib:"), "7:3",
              "expected a number for 'memory_gib', found nothing");
}

TEST(ClusterLoader, MeasuredOps) {
  std::string text =
      replaced(baseCluster, "  mem_bandwidth_gbs: 1000\n",
               "  mem_bandwidth_gbs: 1000\n  measured:\n"
               "    - {op: linear, shape: \"8192x2048,2048x6144\", seconds: 1.5e-4}\n");
  auto l = loadText(text);
  ASSERT_TRUE(l->cluster) << l->errors();
  ASSERT_EQ(l->cluster->device.measured.size(), 1u);
  EXPECT_EQ(l->cluster->device.measured[0].op, "linear");
  EXPECT_EQ(l->cluster->device.measured[0].shape, "8192x2048,2048x6144");
  EXPECT_DOUBLE_EQ(l->cluster->device.measured[0].seconds, 1.5e-4);
  expectError(replaced(text, "op: linear", "op: lineer"), "11:12", "unknown op 'lineer'");
  expectError(replaced(text, "8192x2048,", "8192x,"), "11:27", "bad shape key '8192x,2048x6144'");
}

TEST(ClusterLoader, UnknownPreset) {
  auto l = loadPreset("a100-40");
  EXPECT_FALSE(l->cluster);
  EXPECT_NE(l->errors().find("unknown cluster preset 'a100-40'; did you mean 'a100-40g'? "
                             "(presets: a100-40g a100-80g dgx-a100-40g dgx-a100-80g dgx-h100-80g "
                             "dgx-h200-141g h100-80g host l4-24g)"),
            std::string::npos)
      << l->errors();
  auto missing = loadPreset("/nonexistent/cluster.yaml");
  EXPECT_FALSE(missing->cluster);
  EXPECT_NE(missing->errors().find("cannot read cluster file '/nonexistent/cluster.yaml'"),
            std::string::npos);
}

TEST(ClusterLoader, ReadsTheComponentModelsFigures) {
  std::string text = replaced(baseCluster, "  mem_bandwidth_gbs: 1000\n",
                              "  mem_bandwidth_gbs: 1000\n  sms: 132\n  gemm_tile: [128, 64]\n"
                              "  attention: {fwd_efficiency: 0.6, fwd_half_keys: 200,"
                              " bwd_efficiency: 0.5, bwd_half_keys: 700}\n"
                              "network: {nvlink_gbs: 300, nics_per_node: 4, nic_gbs: 25}\n");
  text = replaced(text, "latency_us: 3}", "latency_us: 3, gpus_per_link: 2}");
  auto l = loadText(text, /*nodes=*/64);
  ASSERT_TRUE(l->cluster) << l->errors();
  const Cluster &c = *l->cluster;
  EXPECT_EQ(c.device.sms, 132);
  EXPECT_EQ(c.device.gemmTile, (std::array<int, 2>{128, 64}));
  EXPECT_DOUBLE_EQ(c.device.attentionBwdHalfKeys, 700);
  EXPECT_DOUBLE_EQ(c.network.nvlinkGBs, 300);
  EXPECT_DOUBLE_EQ(c.network.nvlinkEfficiency, 0.8); // the default
  EXPECT_EQ(c.network.nicsPerNode, 4);
  EXPECT_EQ(c.gpusPerHostLink, 2);
  EXPECT_DOUBLE_EQ(c.sharedH2dGBs(), 10);
  // 64 nodes need no table entry: the network model prices any group.
  EXPECT_DOUBLE_EQ(groupBusGBs(c, 64, 4), std::min(300 * 0.8, 4 * 25 * 0.9));

  expectError(replaced(text, "nic_gbs: 25", "nic_efficiency: 0.5"), "13:10",
              "'network' needs both 'nics_per_node' and 'nic_gbs', or neither");
  expectError(replaced(text, "[128, 64]", "[128]"), "11:14",
              "expected [rows, columns] for 'gemm_tile'");
  expectError(replaced(text, "sms: 132", "sms: 0"), "10:8", "'sms' must be at least 1");
}
