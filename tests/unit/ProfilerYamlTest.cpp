//===- ProfilerYamlTest.cpp - The profiler's cluster files load -----------===//
/// tools/profiler writes cluster files without yaml-cpp (format/ClusterWriter)
/// and reads its --base with the one cluster reader (format/ClusterReader),
/// which the compiler's loader (yaml/ClusterLoader) wraps; these tests load
/// what it writes with the compiler's loader, so a schema change on either
/// side fails here even on machines without a GPU: every preset read and
/// written back loads to the same Cluster as the preset itself, and a cluster assembled from
/// (made-up) measurements, a base preset and flags loads with the measured
/// figures in place.
//===----------------------------------------------------------------------===//
#include "SourceDiagnostics.h"
#include "format/ClusterReader.h"
#include "format/ClusterWriter.h"
#include "format/YamlSubset.h"
#include "tools/profiler/ClusterAssembly.h"
#include "tools/profiler/ProfilerOptions.h"
#include "tools/profiler/ShapesFile.h"
#include "yaml/ClusterLoader.h"
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>

using namespace mist;
using namespace mist::profiler;

namespace {

/// What the loader reported, and the cluster it loaded.
struct Loaded : test::SourceDiagnostics {
  std::optional<Cluster> cluster;
};

std::unique_ptr<Loaded> loadText(const std::string &text) {
  auto l = std::make_unique<Loaded>();
  unsigned id = l->addBuffer(text, "written.yaml");
  l->cluster = loadCluster(id, l->diag);
  return l;
}

std::string presetPath(const std::string &name) {
  return std::string(MIST_CLUSTER_DIR) + "/" + name + ".yaml";
}

std::string written(const Cluster &c, const std::vector<std::string> &comment = {}) {
  std::ostringstream os;
  writeClusterYaml(c, comment, os);
  return os.str();
}

void expectSameCluster(const Cluster &a, const Cluster &b, const std::string &what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.nodes, b.nodes);
  EXPECT_EQ(a.gpusPerNode, b.gpusPerNode);
  EXPECT_EQ(a.tpAcrossNodes, b.tpAcrossNodes);
  EXPECT_EQ(a.device.name, b.device.name);
  EXPECT_EQ(a.device.memoryGiB, b.device.memoryGiB);
  EXPECT_EQ(a.device.usableFraction, b.device.usableFraction);
  EXPECT_EQ(a.device.peakTflops, b.device.peakTflops);
  EXPECT_EQ(a.device.matmulEfficiency, b.device.matmulEfficiency);
  EXPECT_EQ(a.device.memBandwidthGBs, b.device.memBandwidthGBs);
  EXPECT_EQ(a.device.memEfficiency, b.device.memEfficiency);
  EXPECT_EQ(a.device.sms, b.device.sms);
  EXPECT_EQ(a.device.gemmTile, b.device.gemmTile);
  EXPECT_EQ(a.device.attentionFwdEfficiency, b.device.attentionFwdEfficiency);
  EXPECT_EQ(a.device.attentionFwdHalfKeys, b.device.attentionFwdHalfKeys);
  EXPECT_EQ(a.device.attentionBwdEfficiency, b.device.attentionBwdEfficiency);
  EXPECT_EQ(a.device.attentionBwdHalfKeys, b.device.attentionBwdHalfKeys);
  EXPECT_EQ(a.network.nvlinkGBs, b.network.nvlinkGBs);
  EXPECT_EQ(a.network.nvlinkEfficiency, b.network.nvlinkEfficiency);
  EXPECT_EQ(a.network.nicsPerNode, b.network.nicsPerNode);
  EXPECT_EQ(a.network.nicGBs, b.network.nicGBs);
  EXPECT_EQ(a.network.nicEfficiency, b.network.nicEfficiency);
  EXPECT_EQ(a.gpusPerHostLink, b.gpusPerHostLink);
  ASSERT_EQ(a.device.measured.size(), b.device.measured.size());
  for (size_t i = 0; i < a.device.measured.size(); ++i) {
    EXPECT_EQ(a.device.measured[i].op, b.device.measured[i].op);
    EXPECT_EQ(a.device.measured[i].shape, b.device.measured[i].shape);
    EXPECT_EQ(a.device.measured[i].seconds, b.device.measured[i].seconds);
  }
  ASSERT_EQ(a.collectives.size(), b.collectives.size());
  for (size_t i = 0; i < a.collectives.size(); ++i) {
    EXPECT_EQ(a.collectives[i].nodes, b.collectives[i].nodes);
    EXPECT_EQ(a.collectives[i].gpusPerNode, b.collectives[i].gpusPerNode);
    EXPECT_EQ(a.collectives[i].busGBs, b.collectives[i].busGBs);
    EXPECT_EQ(a.collectives[i].latencyUs, b.collectives[i].latencyUs);
  }
  EXPECT_EQ(a.p2pIntraGBs, b.p2pIntraGBs);
  EXPECT_EQ(a.p2pInterGBs, b.p2pInterGBs);
  EXPECT_EQ(a.p2pLatencyUs, b.p2pLatencyUs);
  EXPECT_EQ(a.h2dGBs, b.h2dGBs);
  EXPECT_EQ(a.d2hGBs, b.d2hGBs);
  EXPECT_EQ(a.hostLatencyUs, b.hostLatencyUs);
  EXPECT_EQ(a.hostMemoryGiB, b.hostMemoryGiB);
  ASSERT_EQ(a.interference.size(), b.interference.size());
  for (size_t i = 0; i < a.interference.size(); ++i) {
    EXPECT_EQ(a.interference[i].streams, b.interference[i].streams);
    EXPECT_EQ(a.interference[i].factors, b.interference[i].factors);
  }
}

TEST(ProfilerYaml, PresetsRoundTripThroughTheProfilersReaderAndWriter) {
  std::vector<std::string> dirs = {MIST_CLUSTER_DIR};
  std::vector<std::string> presets = listClusterPresets(dirs);
  ASSERT_GE(presets.size(), 4u);
  for (const std::string &name : presets) {
    Cluster figures;
    std::string error;
    ASSERT_TRUE(readClusterFile(presetPath(name), {}, figures, error)) << error;
    auto direct = loadText([&] {
      std::ifstream in(presetPath(name));
      std::stringstream s;
      s << in.rdbuf();
      return s.str();
    }());
    ASSERT_TRUE(direct->cluster) << direct->errors();
    auto rewritten = loadText(written(figures, {"rewritten by the test"}));
    ASSERT_TRUE(rewritten->cluster) << rewritten->errors() << written(figures);
    expectSameCluster(*direct->cluster, *rewritten->cluster, name);
  }
}

/// Made-up figures of a one-GPU run, as mist-profile would collect them.
Measurements oneGpuRun() {
  Measurements m;
  m.when = "2030-01-01T00:00:00Z";
  m.host = "gpu-host";
  m.software = "CUDA runtime 13.0, driver 13.0";
  m.repeats = 20;
  m.warmup = 3;
  m.deviceName = "NVIDIA H100 80GB HBM3";
  m.memoryGiB = 79.6472;
  m.gemmTflops = 702.34;
  m.gemmShape = "8192x8192x8192";
  m.d2dGBs = 3012.6;
  m.d2dWhat = "1 GiB";
  m.h2dGBs = 54.93;
  m.d2hGBs = 51.21;
  m.hostLatencyUs = 2.5;
  m.hostWhat = "pinned 1 GiB copies";
  m.opsListed = 3;
  m.ops = {{"linear", "8192x2048,2048x6144,6144", 1.21e-4},
           {"attention_grad", "4x2048x2048,4x2048x6144,4x2048x2048,4x16x2048", 2.5e-3}};
  m.notTimed = {{"position_embedding", "2048x2048", "its shape key is the table alone"},
                {"dropout", "4x2048x2048", "no dropout kernel in stdlib/kernels"},
                {"dropout", "8x2048x2048", "no dropout kernel in stdlib/kernels"}};
  m.opsHow = "stdlib/kernels";
  for (unsigned mask = 1; mask < 16; ++mask) {
    if (__builtin_popcount(mask) < 2)
      continue;
    InterferenceEntry f;
    for (int i = 0; i < 4; ++i)
      if (mask & (1u << i)) {
        f.streams.push_back(Stream(i));
        f.factors.push_back(1.0 + 0.01 * (i + 1));
      }
    m.interference.push_back(f);
  }
  m.interferenceHow = "made up";
  m.ncclSkipped = "one rank";
  return m;
}

TEST(ProfilerYaml, AssembledFromABasePresetLoadsWithTheMeasuredFigures) {
  Cluster base;
  std::string error;
  ASSERT_TRUE(readClusterFile(presetPath("h100-80g"), {}, base, error)) << error;
  ProfilerOptions opts;
  opts.basePath = "stdlib/clusters/h100-80g.yaml";
  opts.shapesPath = "gpt3-shapes.tsv";
  opts.peakTflops = 989;
  Measurements m = oneGpuRun();
  // Two ranks' worth of NCCL figures replace the base's (1 node, 2 GPUs) entry.
  m.collectives = {{1, 2, 190.5, 11}};
  m.collectivesHow = "made up";
  m.p2pIntraGBs = 180;
  m.p2pLatencyUs = 9;
  AssembledCluster out;
  ASSERT_TRUE(assembleCluster(m, base, opts, out, error)) << error;
  std::string text = written(out.figures, out.comment);
  auto l = loadText(text);
  ASSERT_TRUE(l->cluster) << l->errors() << text;
  const Cluster &c = *l->cluster;
  EXPECT_EQ(c.name, "h100-80g-measured");
  EXPECT_EQ(c.gpusPerNode, 8); // the base's node
  EXPECT_EQ(c.device.name, "NVIDIA H100 80GB HBM3");
  EXPECT_DOUBLE_EQ(c.device.memoryGiB, 79.65);
  EXPECT_DOUBLE_EQ(c.device.peakTflops, 989);
  EXPECT_DOUBLE_EQ(c.device.matmulEfficiency, 0.71); // 702.34 / 989, 3 digits
  EXPECT_DOUBLE_EQ(c.device.memBandwidthGBs, 3350);  // the base's datasheet figure
  EXPECT_DOUBLE_EQ(c.device.memEfficiency, 0.899);   // 3012.6 / 3350
  ASSERT_EQ(c.device.measured.size(), 2u);
  EXPECT_EQ(c.device.measured[1].op, "linear");
  EXPECT_EQ(c.device.measured[1].shape, "8192x2048,2048x6144,6144");
  EXPECT_DOUBLE_EQ(c.device.measured[1].seconds, 1.21e-4);
  EXPECT_EQ(c.collectives.size(), 15u);
  EXPECT_EQ(c.collectives[0].nodes, 1);
  EXPECT_EQ(c.collectives[0].gpusPerNode, 2);
  EXPECT_DOUBLE_EQ(c.collectives[0].busGBs, 190.5);
  EXPECT_DOUBLE_EQ(c.p2pIntraGBs, 180);
  EXPECT_DOUBLE_EQ(c.p2pInterGBs, 40); // the base's
  EXPECT_DOUBLE_EQ(c.p2pLatencyUs, 9);
  EXPECT_DOUBLE_EQ(c.h2dGBs, 54.93);
  EXPECT_DOUBLE_EQ(c.d2hGBs, 51.21);
  EXPECT_DOUBLE_EQ(c.hostMemoryGiB, 1600); // the base's
  ASSERT_EQ(c.interference.size(), 11u);
  EXPECT_EQ(c.interference.back().streams.size(), 4u);
  // The header says where each figure came from.
  EXPECT_NE(text.find("# h100-80g-measured: measured by mist-profile"), std::string::npos);
  EXPECT_NE(text.find("device.peak_tflops"), std::string::npos);
  EXPECT_NE(text.find("F  --peak-tflops"), std::string::npos);
  EXPECT_NE(text.find("B  stdlib/clusters/h100-80g.yaml"), std::string::npos);
  EXPECT_NE(text.find("position_embedding (1 shape): its shape key"), std::string::npos) << text;
  EXPECT_NE(text.find("dropout (2 shapes): no dropout kernel"), std::string::npos) << text;
}

TEST(ProfilerYaml, AssembledWithoutABaseLoads) {
  ProfilerOptions opts;
  opts.name = "one-gpu";
  Measurements m = oneGpuRun();
  m.interference.clear();
  AssembledCluster out;
  std::string error;
  ASSERT_TRUE(assembleCluster(m, std::nullopt, opts, out, error)) << error;
  auto l = loadText(written(out.figures, out.comment));
  ASSERT_TRUE(l->cluster) << l->errors();
  const Cluster &c = *l->cluster;
  EXPECT_EQ(c.name, "one-gpu");
  EXPECT_EQ(c.nodes, 1);
  EXPECT_EQ(c.gpusPerNode, 1);
  // No datasheet figures: the measured rates, at efficiency 1.
  EXPECT_DOUBLE_EQ(c.device.peakTflops, 702.3);
  EXPECT_DOUBLE_EQ(c.device.matmulEfficiency, 1);
  EXPECT_DOUBLE_EQ(c.device.memEfficiency, 1);
  EXPECT_DOUBLE_EQ(c.p2pIntraGBs, 25); // placeholders
  EXPECT_DOUBLE_EQ(c.p2pInterGBs, 12.5);
  EXPECT_TRUE(c.interference.empty());
  EXPECT_EQ(out.warnings.size(), 2u);
}

TEST(ProfilerYaml, RefusesANodeShapeWithoutCollectiveFigures) {
  ProfilerOptions opts;
  opts.gpusPerNode = 8;
  std::string error;
  EXPECT_FALSE(checkAssemblyInputs(std::nullopt, opts, 1, 1, 1, false, error));
  EXPECT_NE(error.find("8 GPUs per node needs collective figures"), std::string::npos) << error;
  // Eight ranks on one node measure them.
  EXPECT_TRUE(checkAssemblyInputs(std::nullopt, opts, 8, 1, 8, true, error)) << error;
  opts.nodes = 2;
  EXPECT_FALSE(checkAssemblyInputs(std::nullopt, opts, 8, 1, 8, true, error));
  EXPECT_NE(error.find("across nodes"), std::string::npos) << error;
  Cluster base;
  ASSERT_TRUE(readClusterFile(presetPath("a100-40g"), {}, base, error)) << error;
  EXPECT_TRUE(checkAssemblyInputs(base, opts, 1, 1, 1, false, error)) << error;
}

TEST(ProfilerYaml, StringsAndNumbersReadBackAsWritten) {
  EXPECT_EQ(yamlString("NVIDIA H100 80GB HBM3"), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(yamlString("true"), "\"true\"");
  EXPECT_EQ(yamlString("8x"), "\"8x\"");
  EXPECT_EQ(yamlString("a: b # c"), "\"a: b # c\"");
  EXPECT_EQ(yamlNumber(0.1), "0.1");
  EXPECT_EQ(yamlNumber(989), "989");
  Cluster c;
  std::string error;
  ASSERT_TRUE(readClusterFile(presetPath("l4-24g"), {}, c, error)) << error;
  c.name = "odd: \"name\" # 1";
  c.device.name = "yes";
  c.p2pLatencyUs = 1.0 / 3;
  auto l = loadText(written(c));
  ASSERT_TRUE(l->cluster) << l->errors() << written(c);
  EXPECT_EQ(l->cluster->name, c.name);
  EXPECT_EQ(l->cluster->device.name, "yes");
  EXPECT_EQ(l->cluster->p2pLatencyUs, 1.0 / 3);
}

TEST(ProfilerYaml, CheckNamesWhatTheLoaderWouldReject) {
  Cluster c;
  std::string error;
  ASSERT_TRUE(readClusterFile(presetPath("a100-40g"), {}, c, error)) << error;
  EXPECT_TRUE(checkCluster(c).empty());
  c.interference[0].factors[0] = 0.9;
  c.device.measured = {{"linear", "2x3", 1e-3}, {"linear", "2x3", 2e-3}};
  auto bad = checkCluster(c);
  ASSERT_EQ(bad.size(), 2u);
  EXPECT_NE(bad[0].find("two measured entries"), std::string::npos) << bad[0];
  EXPECT_NE(bad[1].find("at least 1"), std::string::npos) << bad[1];
}

TEST(YamlSubset, ReadsBlockAndFlowForms) {
  YamlNode root;
  TextProblem error;
  ASSERT_TRUE(parseYamlSubset("---\n"
                              "a: 1 # comment\n"
                              "b:\n"
                              "  - {x: [1, 2], 'y': \"q # not a comment\"}\n"
                              "  - x: 3\n"
                              "    y: text with spaces\n"
                              "c:\n"
                              "- 4\n"
                              "d: {}\n",
                              root, error))
      << error.message;
  ASSERT_EQ(root.kind, YamlNode::Kind::Map);
  EXPECT_EQ(root.get("a")->text, "1");
  const YamlNode *b = root.get("b");
  ASSERT_TRUE(b && b->kind == YamlNode::Kind::Seq && b->seq.size() == 2);
  EXPECT_EQ(b->seq[0].get("x")->seq[1].text, "2");
  EXPECT_EQ(b->seq[0].get("y")->text, "q # not a comment");
  EXPECT_TRUE(b->seq[0].get("y")->quoted);
  EXPECT_EQ(b->seq[1].get("y")->text, "text with spaces");
  EXPECT_EQ(root.get("c")->seq[0].text, "4");
  EXPECT_EQ(root.get("d")->kind, YamlNode::Kind::Map);
  // Places: the value 1 of a, the second item's y, the sequence under c.
  EXPECT_EQ(root.get("a")->line, 2);
  EXPECT_EQ(root.get("a")->column, 4);
  EXPECT_EQ(b->seq[1].get("y")->line, 6);
  EXPECT_EQ(b->seq[1].get("y")->column, 8);
  EXPECT_EQ(b->seq[0].get("x")->seq[1].column, 13);
  EXPECT_EQ(root.get("c")->line, 8);
}

TEST(YamlSubset, RefusesWhatItDoesNotReadAtItsPlace) {
  struct Case {
    std::string text;
    int line, column;
    std::string says;
  };
  for (const Case &k : std::vector<Case>{
           {"a: &x 1\n", 1, 4, "anchors and aliases"},
           {"a: {b: 1,\n  c: 2}\n", 1, 10, "must fit on one line"},
           {"--- a: 1\n", 1, 5, "on the lines after"},
           {"a: 1\n\tb: 2\n", 2, 1, "tabs"},
           {"a: 1\na: 2\n", 2, 1, "duplicate key 'a'"},
           {"a: {b: 1, b: 2}\n", 1, 11, "duplicate key 'b'"},
           {"a: 1\n---\nb: 2\n", 2, 1, "one YAML document"},
           {"a:\n  b: 1\n    c: 2\n", 3, 5, "unexpected indentation"},
           {"a: \"open\nb: 1\n", 1, 4, "not closed on its line"},
           {"a: \"\\xZZ\"\n", 1, 5, "two hexadecimal digits"},
           {"a: " + std::string(70, '[') + std::string(70, ']') + "\n", 1, 68, "64 levels"},
       }) {
    YamlNode root;
    TextProblem problem;
    EXPECT_FALSE(parseYamlSubset(k.text, root, problem)) << k.text;
    EXPECT_EQ(problem.line, k.line) << k.text << " -> " << problem.message;
    EXPECT_EQ(problem.column, k.column) << k.text << " -> " << problem.message;
    EXPECT_NE(problem.message.find(k.says), std::string::npos) << problem.message;
  }
}

TEST(ClusterReader, ReportsEveryProblemAtItsPlace) {
  std::vector<TextProblem> problems;
  EXPECT_FALSE(readCluster("mist_cluster: 2\nname: x\nnodes: \"1\"\ncolor: red\n", {}, problems));
  ASSERT_GE(problems.size(), 3u);
  EXPECT_EQ(problems[0].line, 4);
  EXPECT_EQ(problems[0].message, "unknown key 'color' in 'cluster'");
  EXPECT_EQ(problems[1].line, 1);
  EXPECT_EQ(problems[1].column, 15);
  EXPECT_EQ(problems[1].message, "unsupported cluster format version 2 (this mistc reads 1)");
  EXPECT_EQ(problems[2].line, 3);
  EXPECT_EQ(problems[2].column, 8);
  EXPECT_EQ(problems[2].message, "expected an integer for 'nodes', found '1'");
}

TEST(ClusterReader, AsksTheCallerWhichOpsExist) {
  std::ifstream in(presetPath("h100-80g"));
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str() + "";
  size_t at = text.find("device:");
  ASSERT_NE(at, std::string::npos);
  text.insert(text.find('\n', at) + 1,
              "  measured:\n    - {op: lineer, shape: \"2x3,3x4\", seconds: 1e-3}\n");
  std::vector<TextProblem> problems;
  EXPECT_TRUE(readCluster(text, {}, problems)) << (problems.empty() ? "" : problems[0].message);
  ClusterReadOptions options;
  options.knownOp = [](std::string_view name) { return name == "linear"; };
  EXPECT_FALSE(readCluster(text, options, problems));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].message, "unknown op 'lineer' in 'measured'");
  EXPECT_EQ(problems[0].column, 12);
}

TEST(ClusterReader, RefusesAnUnknownStream) {
  std::ifstream in(presetPath("a100-40g"));
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  size_t at = text.find("[compute, g2g]");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 14, "[compute, gpu]");
  std::vector<TextProblem> problems;
  EXPECT_FALSE(readCluster(text, {}, problems));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].message, "unknown stream 'gpu' (expected compute, g2g, h2d or d2h)");
  text.replace(at, 14, "[compute, h2g]");
  EXPECT_FALSE(readCluster(text, {}, problems));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].message,
            "unknown stream 'h2g' (expected compute, g2g, h2d or d2h); did you mean 'g2g'?");
}

TEST(ProfilerOptions, ParsesFlagsAndRefusesBadOnes) {
  auto parse = [](std::vector<std::string> args, ProfilerOptions &o, std::string &error) {
    std::vector<char *> argv = {const_cast<char *>("mist-profile")};
    for (std::string &a : args)
      argv.push_back(a.data());
    bool help = false;
    return parseProfilerOptions(static_cast<int>(argv.size()), argv.data(), o, help, error);
  };
  ProfilerOptions o;
  std::string error;
  ASSERT_TRUE(parse({"--out", "x.yaml", "--peak-tflops=989", "--skip-ops", "attention,rope",
                     "--linear-grad", "tf32", "--gpus-per-node", "8", "--repeats", "5"},
                    o, error))
      << error;
  EXPECT_EQ(o.out, "x.yaml");
  EXPECT_EQ(*o.peakTflops, 989);
  EXPECT_EQ(o.skipOps, (std::set<std::string>{"attention", "rope"}));
  EXPECT_EQ(o.linearGrad, LinearGradMode::Tf32);
  EXPECT_EQ(*o.gpusPerNode, 8);
  EXPECT_EQ(o.repeats, 5);
  ProfilerOptions p;
  EXPECT_FALSE(parse({"--peak-tflops", "989"}, p, error));
  EXPECT_EQ(error, "--out FILE is required (see --help)");
  EXPECT_FALSE(parse({"--out", "x", "--peak-tflops", "-1"}, p, error));
  EXPECT_EQ(error, "--peak-tflops needs a positive number, not '-1'");
  EXPECT_FALSE(parse({"--out", "x", "--bogus"}, p, error));
  EXPECT_EQ(error, "unknown argument '--bogus' (see --help)");
}

TEST(ShapesFile, ParsesEntriesAndRefusesBadLines) {
  std::vector<ShapeEntry> e;
  std::string error;
  ASSERT_TRUE(parseShapes("# mist-profile-shapes 1\n# a comment\n"
                          "linear\t8x2048,2048x6144,6144\tbias=true,out=6144\n"
                          "cross_entropy_grad\t,8x50304,8,8x2\t-\n",
                          e, error))
      << error;
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].operands, (std::vector<std::vector<int64_t>>{{8, 2048}, {2048, 6144}, {6144}}));
  EXPECT_EQ(e[0].word("bias", ""), "true");
  EXPECT_EQ(e[0].number("out", 0), 6144);
  EXPECT_TRUE(e[1].operands[0].empty()); // the scalar loss gradient
  EXPECT_EQ(e[1].line, 4);
  EXPECT_FALSE(parseShapes("linear\t8x8\n", e, error));
  EXPECT_EQ(error.rfind("line 1: expected '# mist-profile-shapes 1'", 0), 0u) << error;
  EXPECT_FALSE(parseShapes("# mist-profile-shapes 1\nlinear\t8x0\n", e, error));
  EXPECT_EQ(error, "line 2: bad shape key '8x0' (expected e.g. 8192x2048,2048x6144: positive "
                   "dimensions up to 2^24, operands up to 2^38 elements)");
  // Sizes the op timers multiply must stay within int64_t.
  EXPECT_FALSE(parseShapes("# mist-profile-shapes 1\nlinear\t16777217x8\n", e, error));
  EXPECT_EQ(error.rfind("line 2: bad shape key '16777217x8'", 0), 0u) << error;
  EXPECT_FALSE(parseShapes("# mist-profile-shapes 1\nadd\t65536x65536x65536\n", e, error));
  EXPECT_TRUE(parseShapes("# mist-profile-shapes 1\nadd\t16777216x16384\n", e, error)) << error;
  EXPECT_FALSE(parseShapes("# mist-profile-shapes 1\nadd\t2\t-\nadd\t2\t-\n", e, error));
  EXPECT_EQ(error, "line 3: a second line for add at 2");
}

} // namespace
