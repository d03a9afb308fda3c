//===- TunerTest.cpp - MILP wrapper, Pareto frontier, tuner exactness -----===//
#include "tuner/Tuner.h"
#include "TestUtil.h"
#include "tuner/InterStage.h"
#include "tuner/Pareto.h"
#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>

using namespace mist;
using namespace mist::test;

namespace {

TEST(Milp, SolvesASmallKnapsack) {
  // max 5a + 4b + 3c s.t. 2a + 3b + c <= 5, binaries: a + c = 8 with b? a=1,b=1: 9 (weight 5);
  // a=1,c=1: 8.
  Milp m;
  m.setMinimize(false);
  int a = m.addVar("a", Milp::Kind::Binary, 0, 1, 5);
  int b = m.addVar("b", Milp::Kind::Binary, 0, 1, 4);
  int c = m.addVar("c", Milp::Kind::Binary, 0, 1, 3);
  EXPECT_GT(m.addRow("weight", {{a, 2}, {b, 3}, {c, 1}}, -INFINITY, 5), 0);
  EXPECT_EQ(m.solve(), SolveStatus::Optimal);
  EXPECT_DOUBLE_EQ(m.objective(), 9);
  EXPECT_DOUBLE_EQ(m.value(a), 1);
  EXPECT_DOUBLE_EQ(m.value(c), 0);
}

TEST(Milp, RejectsBadIndicesInsteadOfAborting) {
  Milp m;
  int x = m.addVar("x", Milp::Kind::Continuous, 0, 1, 1);
  EXPECT_EQ(m.addRow("bad", {{x + 7, 1.0}}, 0, 1), -1);
  EXPECT_EQ(m.addRow("nan", {{x, NAN}}, 0, 1), -1);
  EXPECT_TRUE(std::isnan(m.value(99)));
}

TEST(Milp, ReportsInfeasibility) {
  Milp m;
  int x = m.addVar("x", Milp::Kind::Binary, 0, 1, 1);
  m.addRow("impossible", {{x, 1}}, 2, 3);
  EXPECT_EQ(m.solve(), SolveStatus::Infeasible);
}

TEST(Pareto, KeepsTheFrontierOnly) {
  std::vector<ParetoPoint> pts = {{3, 1, 0}, {1, 5, 1}, {2, 2, 2}, {2, 3, 3}, {4, 1, 4}, {1, 6, 5}};
  auto f = paretoFrontier(pts, 0);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].index, 1u);
  EXPECT_EQ(f[1].index, 2u);
  EXPECT_EQ(f[2].index, 0u);
  auto two = paretoFrontier(pts, 2); // the two ends
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].index, 1u);
  EXPECT_EQ(two[1].index, 0u);
}

TEST(InterStage, DeviceTotalAndOrderOnRandomTables) {
  std::mt19937 rng(13);
  std::uniform_real_distribution<double> u(0.1, 2.0);
  const int sizes[] = {1, 2, 4};
  int mixed = 0;
  for (int trial = 0; trial < 40; ++trial) {
    int S = 2 + trial % 3, L = S + 2, totalGpus = 8;
    StageTable table(S);
    size_t config = 0;
    for (int i = 0; i < S; ++i)
      for (int l = 1; l <= L - S + 1; ++l)
        for (int g : sizes) // more GPUs: faster
          for (int k = 0; k < 2; ++k)
            table[i][l].push_back({u(rng) * l / g, u(rng), config++, g});
    InterStageOptions o;
    o.totalLayers = L;
    o.gradAccum = 1 + trial % 4;
    o.totalGpus = totalGpus;
    auto milp = solveInterStage(table, o), brute = bruteForceInterStage(table, o);
    ASSERT_EQ(milp.has_value(), brute.has_value()) << trial;
    if (!brute)
      continue;
    EXPECT_NEAR(milp->objective, brute->objective, 1e-9 * brute->objective) << trial;
    std::map<size_t, int> gpusOf;
    for (int i = 0; i < S; ++i)
      for (auto &[l, cands] : table[i])
        for (const StageCandidate &c : cands)
          gpusOf[c.config] = c.gpus;
    int used = 0, prev = totalGpus;
    std::set<int> distinct;
    for (size_t cfg : milp->configs) {
      used += gpusOf[cfg];
      EXPECT_LE(gpusOf[cfg], prev) << trial; // never growing along the pipeline
      prev = gpusOf[cfg];
      distinct.insert(gpusOf[cfg]);
    }
    EXPECT_EQ(used, totalGpus) << trial;
    mixed += distinct.size() > 1;
  }
  EXPECT_GT(mixed, 0) << "some optimum should mix mesh sizes";
}

TEST(Pareto, IncrementalFrontierMatchesPairwiseDominance) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> coord(0, 12); // small range: many exact ties
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<ParetoPoint> pts;
    for (size_t i = 0; i < 40; ++i)
      pts.push_back({double(coord(rng)), double(coord(rng)), i});
    std::shuffle(pts.begin(), pts.end(), rng); // insertion order must not matter
    std::vector<size_t> expected;
    for (const ParetoPoint &p : pts) {
      bool beaten = false;
      for (const ParetoPoint &q : pts)
        beaten |= q.index != p.index && q.t <= p.t && q.dPerG <= p.dPerG &&
                  (q.t < p.t || q.dPerG < p.dPerG || q.index < p.index);
      if (!beaten)
        expected.push_back(p.index);
    }
    std::vector<size_t> got;
    for (const ParetoPoint &p : paretoFrontier(pts, 0))
      got.push_back(p.index);
    std::sort(expected.begin(), expected.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, expected) << "trial " << trial;
  }
}

TEST(InterStage, MilpMatchesBruteForceOnRandomTables) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.1, 2.0);
  for (int trial = 0; trial < 40; ++trial) {
    int S = 1 + trial % 4, L = S + 3;
    StageTable table(S);
    size_t config = 0;
    for (int i = 0; i < S; ++i)
      for (int l = 1; l <= L - S + 1; ++l)
        for (int k = 0; k < 3; ++k)
          table[i][l].push_back({u(rng) * l, u(rng), config++});
    InterStageOptions o;
    o.totalLayers = L;
    o.gradAccum = 1 + trial % 5;
    o.imbalanceAware = trial % 3 != 0;
    auto milp = solveInterStage(table, o), brute = bruteForceInterStage(table, o);
    ASSERT_TRUE(milp && brute);
    EXPECT_NEAR(milp->objective, brute->objective, 1e-9 * brute->objective) << trial;
  }
}

Cluster fourGpus() {
  Cluster c;
  c.name = "four";
  c.nodes = 1;
  c.gpusPerNode = 4;
  c.device = {"test", 0.012, 1.0, 100, 0.5, 500, 0.8, {}}; // 12 MiB: memory binds
  c.collectives = {{1, 2, 50, 5}, {1, 4, 40, 5}};
  c.h2dGBs = c.d2hGBs = 5;
  c.hostLatencyUs = 5;
  c.p2pIntraGBs = c.p2pInterGBs = 20;
  c.interference = {{{Stream::Compute, Stream::G2G}, {1.1, 1.2}},
                    {{Stream::Compute, Stream::H2D, Stream::D2H}, {1.05, 1.1, 1.1}}};
  return c;
}

/// Every plan of the space, scored by the same model as estimatePlan: for
/// every S, the uniform mesh and, with non-uniform meshes, every
/// non-increasing mix of the allowed sizes that covers the GPUs.
double bruteForceBest(const ModelProfile &mp, const Cluster &c, int64_t B, const SearchSpace &sp) {
  InterferenceTable it(c);
  const int gpus = c.totalGpus(), L = mp.numLayers;
  double best = INFINITY;
  for (int S = 1; S <= std::min(gpus, L); ++S) {
    std::vector<std::vector<int>> sizeSets;
    if (gpus % S == 0)
      sizeSets.push_back({gpus / S});
    if (auto mixed = sp.nonUniformMeshSizes(S, gpus, c.gpusPerNode); !mixed.empty())
      sizeSets.push_back(mixed);
    for (const std::vector<int> &sizes : sizeSets)
      for (int64_t G : divisorsOf(B)) {
        // Options of stage i: (layers, gpus, t, d) for every strategy that fits.
        std::vector<std::vector<std::tuple<int, int, double, double>>> opts(S);
        for (int i = 0; i < S; ++i)
          for (int gps : sizes) {
            const bool uniform = sizes.size() == 1;
            for (int l : sp.layerOptionsForShare(L, S, uniform ? 1 : gps, uniform ? S : gpus))
              for (int tp = 1; tp <= gps; tp *= 2) {
                if (gps % tp || mp.violatedAssumption(tp))
                  continue;
                int dp = gps / tp;
                if (B % (G * dp))
                  continue;
                int b = static_cast<int>(B / (G * dp));
                StageNumbers n{mp.evaluate(RegionKind::Layer, b, tp, c),
                               mp.evaluate(RegionKind::Pre, b, tp, c),
                               mp.evaluate(RegionKind::Post, b, tp, c)};
                double p2p =
                    (i + 1 < S ? n.layer.output / 20e9 : 0) + (i > 0 ? n.layer.gradIn / 20e9 : 0);
                for (const ZeroFlags &z : sp.zeroOptions(dp))
                  for (const OffloadRatios &o : sp.offloadOptions())
                    for (int ck : sp.ckptOptions(l)) {
                      StageKnobs k;
                      k.layers = l;
                      k.ckpt = ck;
                      k.microBatch = b;
                      k.dp = dp;
                      k.tp = tp;
                      k.meshGpusPerNode = gps;
                      k.zero = z;
                      k.offload = o;
                      k.first = i == 0;
                      k.last = i == S - 1;
                      k.inflight = std::min<int>(S - i, G);
                      k.gradAccum = G;
                      StageEstimate e = estimateStage(k, n, c, it);
                      if (e.fits)
                        opts[i].push_back({l, gps, e.t + p2p, e.d});
                    }
              }
          }
        std::vector<double> t(S), d(S);
        std::function<void(int, int, int, int)> rec = [&](int i, int used, int usedGpus, int prev) {
          if (used > L || usedGpus > gpus)
            return;
          if (i == S) {
            if (used == L && usedGpus == gpus)
              best = std::min(best, pipelineSeconds(t, d, G));
            return;
          }
          for (auto &[l, g, ti, di] : opts[i]) {
            if (i > 0 && g > prev)
              continue;
            t[i] = ti;
            d[i] = di;
            rec(i + 1, used + l, usedGpus + g, g);
          }
        };
        rec(0, 0, 0, gpus);
      }
  }
  return best;
}

TEST(Tuner, EqualsTheBruteForceOptimum) {
  auto c = compile("import \"gpt\"\n"
                   "model g = gpt(vocab = 256, hidden = 128, layers = 4, heads = 4)\n"
                   "train { seq_len = 128; global_batch = 8 }\n");
  ASSERT_TRUE(c->module) << c->diagText;
  auto mp = ModelProfile::build(*c->module, c->diag);
  ASSERT_TRUE(mp) << c->diagText;
  // 12 MiB per GPU leaves room for one stage; 7 MiB forces a pipeline (at 8
  // MiB ZeRO and offload fit one stage, faster than a pipeline's tied sum).
  for (double gib : {0.012, 0.007}) {
    Cluster cl = fourGpus();
    cl.device.memoryGiB = gib;
    std::map<SpaceLevel, double> best;
    for (SpaceLevel level : {SpaceLevel::Megatron, SpaceLevel::Zero, SpaceLevel::Ckpt,
                             SpaceLevel::Offload, SpaceLevel::Full, SpaceLevel::DeepSpeed}) {
      TunerOptions opts;
      opts.space.level = level;
      opts.space.weightGradRatios = {0, 1};
      opts.space.optActRatios = {0, 0.5};
      opts.paretoLimit = 0; // whole frontiers: the MILP is then exact
      auto r = tune(*mp, cl, 8, opts, c->diag);
      ASSERT_TRUE(r) << c->diagText;
      best[level] = r->estimate.iterationSeconds;
      if (level != SpaceLevel::Full)
        continue; // the ablation spaces choose with one tp and, for megatron, blind to d
      double brute = bruteForceBest(*mp, cl, 8, opts.space);
      ASSERT_TRUE(std::isfinite(brute));
      EXPECT_NEAR(r->estimate.iterationSeconds, brute, 1e-9 * brute) << gib;
      EXPECT_NEAR(r->objective, brute, 1e-9 * brute) << gib;
      if (gib < 0.01) {
        EXPECT_GT(r->plan.stages.size(), 1u);
      }
    }
    for (auto &[level, seconds] : best) // every ablation space is a subset of the full one
      EXPECT_GE(seconds, best[SpaceLevel::Full] * (1 - 1e-12)) << spaceLevelName(level);
  }
}

TEST(SearchSpace, TheMegatronSpaceSplitsLayersEvenlyAndRecomputesAlike) {
  SearchSpace megatron;
  megatron.level = SpaceLevel::Megatron;
  EXPECT_TRUE(megatron.layerOptions(44, 8).empty()); // 5/5/6/6/...: Megatron-LM refuses it
  EXPECT_EQ(megatron.layerOptions(48, 8), std::vector<int>{6});
  EXPECT_TRUE(megatron.uniformCkpt());
  EXPECT_EQ(megatron.ckptOptions(6, /*recomputeAll=*/false), std::vector<int>{0});
  EXPECT_EQ(megatron.ckptOptions(6, true), std::vector<int>{6});
  SearchSpace full;
  EXPECT_EQ(full.layerOptions(44, 8), (std::vector<int>{3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(full.ckptOptions(3).size(), 4u);
}

TEST(SearchSpace, TheDeepSpeedSpaceKeepsDeepSpeedsRules) {
  SearchSpace ds;
  ds.level = SpaceLevel::DeepSpeed;
  EXPECT_EQ(ds.layerOptions(44, 8), (std::vector<int>{5, 6})); // partitioned by parameters
  const ZeroFlags zero1{false, false, true}, zero2{false, true, true}, zero3{true, true, true};
  const OffloadRatios none{}, optimizer{0, 1, 1, 0}, params{1, 1, 1, 0}, acts{0, 0, 0, 1};
  EXPECT_TRUE(ds.allows(zero2, none, 0, 4, /*stages=*/1));
  EXPECT_FALSE(ds.allows(zero2, none, 0, 4, 2)); // the pipeline engine takes ZeRO-1 at most
  EXPECT_TRUE(ds.allows(zero1, optimizer, 0, 4, 2));
  EXPECT_FALSE(ds.allows(ZeroFlags{}, optimizer, 0, 4, 1)); // ZeRO-Offload needs ZeRO
  EXPECT_FALSE(ds.allows(zero2, params, 0, 4, 1));          // parameter offload is ZeRO-3's
  EXPECT_TRUE(ds.allows(zero3, params, 0, 4, 1));
  EXPECT_FALSE(ds.allows(zero1, acts, 2, 4, 1)); // checkpoints offloaded only when all recompute
  EXPECT_TRUE(ds.allows(zero1, acts, 4, 4, 1));
  for (const OffloadRatios &o : ds.offloadOptions())
    for (double r : {o.weights, o.grads, o.optimizer, o.activations})
      EXPECT_TRUE(r == 0 || r == 1); // no partial ratios
}

TEST(Tuner, AblationSpacesTuneOnlyPlansTheirSystemRuns) {
  // Six layers on 4 GPUs with less and less memory, so that pipelines win:
  // Megatron-LM cannot split 6 layers over 4 stages, DeepSpeed can (2/2/1/1).
  auto c = compile("import \"gpt\"\n"
                   "model g = gpt(vocab = 256, hidden = 128, layers = 6, heads = 4)\n"
                   "train { seq_len = 128; global_batch = 8 }\n");
  ASSERT_TRUE(c->module) << c->diagText;
  auto mp = ModelProfile::build(*c->module, c->diag);
  ASSERT_TRUE(mp) << c->diagText;
  int pipelines = 0, recomputing = 0;
  for (double gib : {0.012, 0.007, 0.005}) {
    Cluster cl = fourGpus();
    cl.device.memoryGiB = gib;
    for (SpaceLevel level : {SpaceLevel::Megatron, SpaceLevel::Zero, SpaceLevel::DeepSpeed}) {
      TunerOptions opts;
      opts.space.level = level;
      auto r = tune(*mp, cl, 8, opts, c->diag);
      if (!r)
        continue; // nothing of this space fits
      const std::vector<StagePlan> &st = r->plan.stages;
      const bool all = st.front().ckptLayers > 0;
      pipelines += st.size() > 1;
      recomputing += all;
      for (const StagePlan &s : st) {
        int layers = s.lastLayer - s.firstLayer + 1;
        EXPECT_EQ(s.ckptLayers, all ? layers : 0) << spaceLevelName(level) << " " << gib;
        EXPECT_EQ(s.tp, st.front().tp) << spaceLevelName(level);
        if (level != SpaceLevel::DeepSpeed) {
          EXPECT_EQ(layers * int(st.size()), 6) << spaceLevelName(level);
        } else if (st.size() > 1) {
          EXPECT_FALSE(s.zero.grads || s.zero.weights);
        }
      }
    }
  }
  EXPECT_GT(pipelines, 0); // the rules above were exercised
  EXPECT_GT(recomputing, 0);
}

TEST(Tuner, NonUniformMeshesEqualTheBruteForceOptimum) {
  // Six layers on 4 GPUs: with non-uniform meshes S = 3 becomes possible
  // (2 + 1 + 1 GPUs), which uniform meshes cannot do.
  auto c = compile("import \"gpt\"\n"
                   "model g = gpt(vocab = 256, hidden = 128, layers = 6, heads = 4)\n"
                   "train { seq_len = 128; global_batch = 8 }\n");
  ASSERT_TRUE(c->module) << c->diagText;
  auto mp = ModelProfile::build(*c->module, c->diag);
  ASSERT_TRUE(mp) << c->diagText;
  for (double gib : {0.012, 0.007}) {
    Cluster cl = fourGpus();
    cl.device.memoryGiB = gib;
    TunerOptions opts;
    opts.space.weightGradRatios = {0};
    opts.space.optActRatios = {0, 0.5};
    opts.space.layerSlack = 1;
    opts.paretoLimit = 0;
    auto uniform = tune(*mp, cl, 8, opts, c->diag);
    opts.space.nonUniformMeshes = true;
    auto mixed = tune(*mp, cl, 8, opts, c->diag);
    ASSERT_TRUE(mixed) << c->diagText;
    double brute = bruteForceBest(*mp, cl, 8, opts.space);
    ASSERT_TRUE(std::isfinite(brute));
    EXPECT_NEAR(mixed->estimate.iterationSeconds, brute, 1e-9 * brute) << gib;
    if (uniform) { // a superset of the uniform space
      EXPECT_LE(mixed->estimate.iterationSeconds, uniform->estimate.iterationSeconds * (1 + 1e-12));
    }
    int used = 0;
    for (const StagePlan &s : mixed->plan.stages)
      used += s.gpus();
    EXPECT_EQ(used, 4);
  }
}

TEST(Tuner, IsDeterministic) {
  auto c = compileFile(std::string(MIST_EXAMPLES_DIR) + "/tiny-llama.mist");
  ASSERT_TRUE(c->module) << c->diagText;
  auto mp = ModelProfile::build(*c->module, c->diag);
  ASSERT_TRUE(mp);
  Cluster cl = fourGpus();
  TunerOptions opts;
  auto a = tune(*mp, cl, 16, opts, c->diag), b = tune(*mp, cl, 16, opts, c->diag);
  ASSERT_TRUE(a && b) << c->diagText;
  EXPECT_EQ(a->estimate.iterationSeconds, b->estimate.iterationSeconds);
  ASSERT_EQ(a->plan.stages.size(), b->plan.stages.size());
  for (size_t i = 0; i < a->plan.stages.size(); ++i) {
    EXPECT_EQ(a->plan.stages[i].lastLayer, b->plan.stages[i].lastLayer);
    EXPECT_EQ(a->plan.stages[i].ckptLayers, b->plan.stages[i].ckptLayers);
    EXPECT_EQ(a->plan.stages[i].tp, b->plan.stages[i].tp);
  }
}

TEST(Tuner, ExplainsAnInfeasibleCluster) {
  auto c = compileFile(std::string(MIST_EXAMPLES_DIR) + "/gpt3-1.3b.mist");
  ASSERT_TRUE(c->module) << c->diagText;
  auto mp = ModelProfile::build(*c->module, c->diag);
  ASSERT_TRUE(mp);
  Cluster cl = fourGpus(); // 20 MiB per GPU
  TunerOptions opts;
  opts.space.optActRatios = {0, 1};
  opts.space.weightGradRatios = {0, 1};
  EXPECT_FALSE(tune(*mp, cl, 8, opts, c->diag));
  EXPECT_NE(c->diagText.find("no plan fits in memory: the smallest peak of any plan in the 'full' "
                             "space is"),
            std::string::npos)
      << c->diagText;
}

TEST(Tuner, RespectsPinnedHostMemory) {
  auto c = compileFile(std::string(MIST_EXAMPLES_DIR) + "/tiny-gpt.mist");
  ASSERT_TRUE(c->module) << c->diagText;
  auto mp = ModelProfile::build(*c->module, c->diag);
  ASSERT_TRUE(mp);
  Cluster cl = fourGpus();
  cl.device.memoryGiB = 0.0005; // 512 KiB: only plans that offload fit
  TunerOptions opts;
  opts.space.optActRatios = {0, 1};
  opts.space.weightGradRatios = {0, 1};
  auto roomy = tune(*mp, cl, 4, opts, c->diag);
  ASSERT_TRUE(roomy) << c->diagText;
  double host = 0;
  for (const StageEstimate &s : roomy->estimate.stages)
    host = std::max(host, s.mem.host);
  ASSERT_GT(host, 0) << "the device budget should force an offload";
  cl.hostMemoryGiB = 0.5 * host * cl.gpusPerNode / (1ull << 30);
  EXPECT_FALSE(tune(*mp, cl, 4, opts, c->diag));
  EXPECT_NE(c->diagText.find("offloads at least"), std::string::npos) << c->diagText;
}

} // namespace
