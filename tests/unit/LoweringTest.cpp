//===- LoweringTest.cpp - The IR at a stage shape, and parameter layouts --===//
/// Buffer sizes equal the IR types at (b, tp); every parameter's tp shards
/// cover its full tensor exactly once; a fused q/k/v projection's shards
/// hold matching q, k and v heads; sizes that tp does not divide are errors.
//===----------------------------------------------------------------------===//
#include "backend/trainer/Lowering.h"
#include "TestUtil.h"
#include "backend/trainer/ScratchPlanner.h"
#include <map>

using namespace mist;
using namespace mist::test;

namespace {

std::optional<LoweredStage> lower(Compiled &c, int b, int tp) {
  return lowerForStage(*c.module, b, tp, c.diag);
}

int64_t product(const std::vector<int64_t> &v) {
  int64_t p = 1;
  for (int64_t d : v)
    p *= d;
  return p;
}

TEST(Lowering, BufferSizesFollowTheStageShape) {
  auto c = compileFile(std::string(MIST_EXAMPLES_DIR) + "/tiny-gpt.mist",
                       {"shape-infer", "tp-shard", "backward"});
  ASSERT_TRUE(c->module) << c->diagText;
  for (int tp : {1, 2, 4})
    for (int b : {1, 3}) {
      auto st = lower(*c, b, tp);
      ASSERT_TRUE(st) << c->diagText;
      for (const LoweredBuffer &buf : st->buffers) {
        if (buf.name == "qkv") {
          EXPECT_EQ(buf.shape, (std::vector<int64_t>{b, 64, 3 * 64 / tp}));
        }
        if (buf.name == "ctx.lse") {
          EXPECT_EQ(buf.shape, (std::vector<int64_t>{b, 4 / tp, 64}));
        }
        if (buf.name == "cross_entropy") {
          EXPECT_TRUE(buf.shape.empty()); // the scalar loss
        }
      }
      // The tied head reads the embedding table: one buffer, one layout.
      int tables = 0;
      for (const LoweredBuffer &buf : st->buffers)
        tables += buf.name == "pre.embedding.weight";
      EXPECT_EQ(tables, 1);
      ASSERT_TRUE(st->param("pre.embedding.weight"));
    }
}

/// Every tp rank's ranges, over all ranks, tile the shard axis once, and
/// their total equals the local buffer's extent.
void expectTiling(const LoweredStage &st, const ParamLayout &p) {
  if (p.shardAxis < 0)
    return;
  const int64_t size = p.fullShape[p.shardAxis];
  std::vector<int> covered(size, 0);
  for (int r = 0; r < st.tp; ++r) {
    int64_t local = 0;
    for (auto [b, e] : p.rangesOf(r, st.tp)) {
      ASSERT_LE(0, b);
      ASSERT_LE(e, size);
      for (int64_t i = b; i < e; ++i)
        ++covered[i];
      local += e - b;
    }
    for (const LoweredBuffer &buf : st.buffers) {
      if (buf.name == p.name) {
        EXPECT_EQ(local, buf.shape[p.shardAxis]) << p.name;
      }
    }
  }
  for (int64_t i = 0; i < size; ++i)
    EXPECT_EQ(covered[i], 1) << p.name << " element " << i;
}

TEST(Lowering, ShardsTileEveryParameter) {
  for (const char *file : {"/tiny-gpt.mist", "/tiny-llama.mist"}) {
    auto c =
        compileFile(std::string(MIST_EXAMPLES_DIR) + file, {"shape-infer", "tp-shard", "backward"});
    ASSERT_TRUE(c->module) << c->diagText;
    for (int tp : {1, 2}) {
      auto st = lower(*c, 2, tp);
      ASSERT_TRUE(st) << c->diagText;
      for (const ParamLayout &p : st->params) {
        expectTiling(*st, p);
        int64_t local = 0;
        for (const LoweredBuffer &buf : st->buffers)
          if (buf.name == p.name)
            local = buf.elements();
        EXPECT_EQ(local * (p.shardAxis >= 0 ? tp : 1), product(p.fullShape)) << p.name;
      }
    }
  }
}

TEST(Lowering, FusedQkvShardsHoldMatchingHeads) {
  auto c = compileFile(std::string(MIST_EXAMPLES_DIR) + "/tiny-gpt.mist",
                       {"shape-infer", "tp-shard", "backward"});
  ASSERT_TRUE(c->module) << c->diagText;
  auto st = lower(*c, 1, 2);
  ASSERT_TRUE(st) << c->diagText;
  const ParamLayout *w = st->param("layer.attn.qkv.weight"),
                    *bias = st->param("layer.attn.qkv.bias");
  ASSERT_TRUE(w && bias);
  EXPECT_EQ(w->groups, (std::vector<int64_t>{64, 64, 64})); // q, k, v of 4 heads x 16
  using R = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(w->rangesOf(0, 2), (R{{0, 32}, {64, 96}, {128, 160}}));
  EXPECT_EQ(w->rangesOf(1, 2), (R{{32, 64}, {96, 128}, {160, 192}}));
  EXPECT_EQ(bias->rangesOf(1, 2), w->rangesOf(1, 2));
  // A plain column-parallel weight is one slice.
  const ParamLayout *fc1 = st->param("layer.mlp.fc1.weight");
  ASSERT_TRUE(fc1);
  EXPECT_EQ(fc1->rangesOf(1, 2), (R{{128, 256}}));
}

TEST(Lowering, GroupedQueryProjectionsAreSeparateSlices) {
  auto c = compileFile(std::string(MIST_EXAMPLES_DIR) + "/tiny-llama.mist",
                       {"shape-infer", "tp-shard", "backward"});
  ASSERT_TRUE(c->module) << c->diagText;
  auto st = lower(*c, 1, 2);
  ASSERT_TRUE(st) << c->diagText;
  int sliced = 0;
  for (const ParamLayout &p : st->params)
    if (p.shardAxis >= 0) {
      EXPECT_EQ(p.groups.size(), 1u) << p.name; // separate q, k and v linears
      ++sliced;
    }
  EXPECT_GE(sliced, 7); // q, k, v, o, gate, up, down (+ the vocabulary-split tables)
}

TEST(Lowering, ReportsSizesTpDoesNotDivide) {
  auto c = compileFile(std::string(MIST_EXAMPLES_DIR) + "/tiny-gpt.mist",
                       {"shape-infer", "tp-shard", "backward"});
  ASSERT_TRUE(c->module) << c->diagText;
  EXPECT_FALSE(lower(*c, 1, 8)); // 4 heads over 8 ranks
  EXPECT_NE(c->diagText.find("is not a positive integer at b = 1, tp = 8"), std::string::npos)
      << c->diagText;
}

TEST(Lowering, NeedsTheDifferentiatedModule) {
  auto c = compileFile(std::string(MIST_EXAMPLES_DIR) + "/tiny-gpt.mist", {"shape-infer"});
  ASSERT_TRUE(c->module) << c->diagText;
  EXPECT_FALSE(lower(*c, 1, 1));
  EXPECT_NE(c->diagText.find("lowering needs a module after shape-infer, tp-shard and backward"),
            std::string::npos);
}

} // namespace

namespace {

// The scratch arenas: buffers live at once in some region run never
// overlap, every planned buffer fits its region's arena, and sharing makes
// the arenas smaller than the buffers laid end to end.
TEST(ScratchPlanner, BuffersLiveAtOnceNeverOverlap) {
  auto c = compileFile(std::string(MIST_EXAMPLES_DIR) + "/tiny-gpt.mist",
                       {"shape-infer", "tp-shard", "backward"});
  ASSERT_TRUE(c->module) << c->diagText;
  auto st = lower(*c, 2, 2);
  ASSERT_TRUE(st) << c->diagText;
  std::vector<bool> scratch(st->buffers.size(), false);
  for (size_t b = 0; b < st->buffers.size(); ++b)
    scratch[b] = st->buffers[b].role == Role::Act && st->buffers[b].dtype != DType::I32;
  ScratchPlan plan = planScratch(*st, scratch, true, true);
  int64_t endToEnd = 0;
  for (size_t b = 0; b < st->buffers.size(); ++b)
    if (plan.offset[b] >= 0) {
      EXPECT_TRUE(scratch[b]) << st->buffers[b].name;
      EXPECT_EQ(plan.offset[b] % 256, 0);
      ASSERT_GE(plan.run[b], 0);
      EXPECT_LE(plan.offset[b] + st->buffers[b].elements() * dtypeBytes(st->buffers[b].dtype),
                plan.bytes[size_t(plan.run[b])]);
      endToEnd += st->buffers[b].elements() * dtypeBytes(st->buffers[b].dtype);
    }
  int64_t arenas = 0;
  for (int64_t bytes : plan.bytes)
    arenas += bytes;
  EXPECT_LT(arenas, endToEnd);
  // Within each run, two buffers that are both used overlap in memory only
  // if their live intervals do not.
  for (const LoweredRegion &region : st->regions)
    for (const auto *ops : {&region.forward, &region.backward}) {
      std::map<int, std::pair<int, int>> live;
      for (int i = 0; i < int(ops->size()); ++i)
        for (const auto *ids : {&(*ops)[size_t(i)].operands, &(*ops)[size_t(i)].results})
          for (int b : *ids)
            if (plan.offset[size_t(b)] >= 0) {
              auto [it, fresh] = live.try_emplace(b, std::make_pair(i, i));
              it->second.second = i;
            }
      const bool forward = ops == &region.forward;
      for (int b : forward ? region.inputs : region.gradInputs)
        if (live.count(b))
          live[b].first = -1;
      for (int b : forward ? region.outputs : region.gradOutputs)
        if (live.count(b))
          live[b].second = int(ops->size());
      for (auto &[a, ia] : live)
        for (auto &[b, ib] : live) {
          if (a >= b || ia.second < ib.first || ib.second < ia.first)
            continue;
          const int64_t a0 = plan.offset[size_t(a)],
                        a1 = a0 + st->buffers[size_t(a)].elements() *
                                      dtypeBytes(st->buffers[size_t(a)].dtype);
          const int64_t b0 = plan.offset[size_t(b)],
                        b1 = b0 + st->buffers[size_t(b)].elements() *
                                      dtypeBytes(st->buffers[size_t(b)].dtype);
          EXPECT_TRUE(a1 <= b0 || b1 <= a0)
              << st->buffers[size_t(a)].name << " and " << st->buffers[size_t(b)].name;
        }
    }
}

} // namespace
