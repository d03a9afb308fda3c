//===- ProfileShapesTest.cpp - What --emit=profile-shapes lists -----------===//
/// The list names every measured-table lookup of the performance model (a
/// cluster whose table holds exactly the list prices every op by it), the
/// profiler's reader reads it back, and the tuner's stage shapes are the
/// ones tune() evaluates.
//===----------------------------------------------------------------------===//
#include "backend/reports/ProfileShapes.h"
#include "TestUtil.h"
#include "tools/profiler/ShapesFile.h"
#include "tuner/Tuner.h"
#include "yaml/ClusterLoader.h"

using namespace mist;
using namespace mist::test;

namespace {

Cluster preset(const std::string &name) {
  llvm::SourceMgr sm;
  std::string text;
  llvm::raw_string_ostream os(text);
  DiagnosticEngine diag(sm, os);
  std::vector<std::string> dirs = {MIST_CLUSTER_DIR};
  auto c = loadClusterByName(name, 0, dirs, diag);
  EXPECT_TRUE(c) << os.str();
  return c ? *c : Cluster{};
}

TEST(ProfileShapes, ListsEveryLookupOfThePerformanceModel) {
  for (const char *example : {"tiny-gpt.mist", "tiny-llama.mist"}) {
    auto c = compileFile(std::string(MIST_EXAMPLES_DIR) + "/" + example);
    ASSERT_TRUE(c->module) << c->diagText;
    auto model = ModelProfile::build(*c->module, c->diag);
    ASSERT_TRUE(model) << c->diagText;
    const std::vector<std::pair<int, int>> stages = {{2, 2}, {4, 1}};
    auto shapes = collectProfileShapes(*c->module, *model, stages, c->diag);
    ASSERT_TRUE(shapes) << c->diagText;

    // Sorted, one line per (op, shape), no all_reduce (the collective table prices it).
    for (size_t i = 1; i < shapes->size(); ++i)
      EXPECT_LT(std::pair((*shapes)[i - 1].op, (*shapes)[i - 1].shape),
                std::pair((*shapes)[i].op, (*shapes)[i].shape));
    for (const ProfileShape &s : *shapes)
      EXPECT_NE(s.op, "all_reduce");

    // A cluster whose measured table is exactly the list: every op the
    // model prices at these shapes takes its 1 ms.
    Cluster cl = preset("a100-40g");
    for (const ProfileShape &s : *shapes)
      cl.device.measured.push_back({s.op, s.shape, 1e-3});
    for (auto [b, tp] : stages) {
      double compute = 0;
      for (RegionKind r : {RegionKind::Pre, RegionKind::Layer, RegionKind::Post}) {
        RegionNumbers n = model->evaluate(r, b, tp, cl);
        compute += n.fwdCompute + n.bwdCompute;
      }
      EXPECT_NEAR(compute, 1e-3 * model->measuredLookups(b, tp).size(), 1e-12)
          << example << " b = " << b << ", tp = " << tp;
    }

    // The profiler reads the file back line for line, with the attributes.
    std::string text;
    llvm::raw_string_ostream os(text);
    writeProfileShapes(*shapes, {"a test"}, os);
    std::vector<profiler::ShapeEntry> read;
    std::string error;
    ASSERT_TRUE(profiler::parseShapes(os.str(), read, error)) << error;
    ASSERT_EQ(read.size(), shapes->size());
    for (size_t i = 0; i < read.size(); ++i) {
      EXPECT_EQ(read[i].op, (*shapes)[i].op);
      EXPECT_EQ(read[i].shape, (*shapes)[i].shape);
      if (read[i].op == "attention" || read[i].op == "attention_grad") {
        // This rank's heads: the width of q is heads x head_dim.
        const auto &q = read[i].operands[read[i].op == "attention" ? 0 : 1];
        double h = read[i].number("heads", 0), kv = read[i].number("kv_heads", 0),
               d = read[i].number("head_dim", 0);
        ASSERT_GT(h * kv * d, 0) << (*shapes)[i].attrs;
        bool fused = read[i].operands.size() == (read[i].op == "attention" ? 1u : 4u);
        EXPECT_EQ(q.back(), fused ? (h + 2 * kv) * d : h * d) << (*shapes)[i].attrs;
      }
    }
  }
}

Cluster fourGpus() {
  Cluster c;
  c.name = "four";
  c.nodes = 1;
  c.gpusPerNode = 4;
  c.device = {"test", 0.012, 1.0, 100, 0.5, 500, 0.8, {}};
  c.collectives = {{1, 2, 50, 5}, {1, 4, 40, 5}};
  c.h2dGBs = c.d2hGBs = 5;
  c.p2pIntraGBs = c.p2pInterGBs = 20;
  return c;
}

TEST(ProfileShapes, TunerStageShapesAreTheOnesTuneEvaluates) {
  auto c = compile("import \"gpt\"\n"
                   "model g = gpt(vocab = 256, hidden = 128, layers = 6, heads = 4)\n"
                   "train { seq_len = 128; global_batch = 8 }\n");
  ASSERT_TRUE(c->module) << c->diagText;
  auto mp = ModelProfile::build(*c->module, c->diag);
  ASSERT_TRUE(mp) << c->diagText;
  for (SpaceLevel level : {SpaceLevel::Megatron, SpaceLevel::Full})
    for (bool nonUniform : {false, true}) {
      if (nonUniform && level != SpaceLevel::Full)
        continue;
      TunerOptions opts;
      opts.space.level = level;
      opts.space.nonUniformMeshes = nonUniform;
      opts.space.weightGradRatios = {0};
      opts.space.optActRatios = {0};
      Cluster cl = fourGpus();
      auto r = tune(*mp, cl, 8, opts, c->diag);
      ASSERT_TRUE(r) << c->diagText;
      auto listed = tunerStageShapes(*mp, cl, 8, opts);
      EXPECT_EQ(listed, r->stats.stageShapes) << spaceLevelName(level) << " " << nonUniform;
      EXPECT_FALSE(listed.empty());
    }
}

} // namespace
