//===- InterStage.cpp - The MILP that splits layers and picks strategies --===//
#include "tuner/InterStage.h"

#include <algorithm>
#include <cmath>
#include <functional>

using namespace mist;

double mist::interStageObjective(const std::vector<double> &t, const std::vector<double> &d, int G,
                                 bool imbalanceAware) {
  double sum = 0, maxT = 0, maxD = 0, before = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    sum += t[i];
    maxT = std::max(maxT, t[i]);
    if (imbalanceAware)
      maxD = std::max(maxD, d[i] - before);
    before += t[i];
  }
  return sum + (G - 1) * maxT + maxD;
}

namespace {

using Row = std::vector<std::pair<int, double>>;

/// A cheap bound first: every stage at its fastest option for any layer
/// count, the slowest of those for the (G-1) steady micro-batches; nullopt
/// when a stage has no finite option at all.
std::optional<double> cheapLowerBound(const StageTable &table, int gradAccum) {
  double lower = 0, maxMin = 0;
  for (const auto &byLayers : table) {
    double best = INFINITY;
    for (auto &[l, cands] : byLayers)
      for (const StageCandidate &c : cands)
        best = std::min(best, c.t);
    if (!std::isfinite(best))
      return std::nullopt;
    lower += best;
    maxMin = std::max(maxMin, best);
  }
  return lower + (gradAccum - 1) * maxMin;
}

/// z: stage `stage` runs candidate `k` of its `layers`-layer options.
struct ZVar {
  int var, stage, layers;
  size_t k;
};

/// The MILP's variables as they are added: Max_t, Max_d (-1 when not
/// imbalance-aware), T_i per stage, and every z.
struct InterStageMilp {
  Milp milp;
  int maxT = -1, maxD = -1;
  std::vector<int> T;
  std::vector<ZVar> zs;
};

/// Stage i's x (layer count) and z (candidate) variables and its rows:
/// one z per picked x, exactly one x, T_i's definition, Max_t >= T_i and
/// Max_d >= D_i - sum_{j<i} T_j. False when the stage has no option.
bool addStage(InterStageMilp &p, const StageTable &table, int i, const InterStageOptions &opts,
              Row &layerSum) {
  Milp &milp = p.milp;
  Row oneCount, tDef{{p.T[i], -1}}, dDef;
  for (auto &[l, cands] : table[i]) {
    if (cands.empty())
      continue;
    int x = milp.addVar("x_" + std::to_string(i) + "_" + std::to_string(l), Milp::Kind::Binary, 0,
                        1, 0);
    oneCount.push_back({x, 1});
    layerSum.push_back({x, double(l)});
    Row pick{{x, -1}};
    for (size_t k = 0; k < cands.size(); ++k) {
      int z =
          milp.addVar("z_" + std::to_string(i) + "_" + std::to_string(l) + "_" + std::to_string(k),
                      Milp::Kind::Binary, 0, 1, 0);
      p.zs.push_back({z, i, l, k});
      pick.push_back({z, 1});
      tDef.push_back({z, cands[k].t});
      dDef.push_back({z, cands[k].d});
    }
    milp.addRow("pick_" + std::to_string(i) + "_" + std::to_string(l), pick, 0, 0);
  }
  if (oneCount.empty())
    return false;
  milp.addRow("one_count_" + std::to_string(i), oneCount, 1, 1);
  milp.addRow("T_def_" + std::to_string(i), tDef, 0, 0);
  milp.addRow("max_t_" + std::to_string(i), {{p.maxT, 1}, {p.T[i], -1}}, 0, INFINITY);
  if (opts.imbalanceAware) {
    // Max_d >= D_i - sum_{j<i} T_j, with D_i = sum d z.
    Row row{{p.maxD, 1}};
    for (auto [z, coef] : dDef)
      row.push_back({z, -coef});
    for (int j = 0; j < i; ++j)
      row.push_back({p.T[j], 1});
    milp.addRow("max_d_" + std::to_string(i), row, 0, INFINITY);
  }
  return true;
}

/// Non-uniform meshes: the chosen GPUs sum to `totalGpus` and never grow
/// along the pipeline.
void addGpuRows(InterStageMilp &p, const StageTable &table, int totalGpus) {
  const int S = static_cast<int>(table.size());
  std::vector<Row> gpusOf(S);
  for (const ZVar &z : p.zs)
    gpusOf[z.stage].push_back({z.var, double(table[z.stage].at(z.layers)[z.k].gpus)});
  Row all;
  for (int i = 0; i < S; ++i) {
    all.insert(all.end(), gpusOf[i].begin(), gpusOf[i].end());
    if (i + 1 < S) { // gpus_i - gpus_{i+1} >= 0
      Row row = gpusOf[i];
      for (auto [z, g] : gpusOf[i + 1])
        row.push_back({z, -g});
      p.milp.addRow("gpus_order_" + std::to_string(i), row, 0, INFINITY);
    }
  }
  p.milp.addRow("gpus", all, totalGpus, totalGpus);
}

/// The layer counts and candidates of the solution's z = 1.
InterStageChoice readChoice(const InterStageMilp &p, const StageTable &table,
                            const InterStageOptions &opts) {
  const int S = static_cast<int>(table.size());
  InterStageChoice choice;
  choice.layers.assign(S, 0);
  choice.configs.assign(S, 0);
  std::vector<double> t(S), d(S);
  for (const ZVar &z : p.zs)
    if (p.milp.value(z.var) > 0.5) {
      const StageCandidate &c = table[z.stage].at(z.layers)[z.k];
      choice.layers[z.stage] = z.layers;
      choice.configs[z.stage] = c.config;
      t[z.stage] = c.t;
      d[z.stage] = c.d;
    }
  // Report the objective recomputed from the choice, not the solver's
  // floating-point sum.
  choice.objective = interStageObjective(t, d, opts.gradAccum, opts.imbalanceAware);
  return choice;
}

} // namespace

std::optional<InterStageChoice> mist::solveInterStage(const StageTable &table,
                                                      const InterStageOptions &opts,
                                                      SolveStatus *statusOut) {
  const int S = static_cast<int>(table.size());
  auto setStatus = [&](SolveStatus s) {
    if (statusOut)
      *statusOut = s;
  };
  std::optional<double> lower = cheapLowerBound(table, opts.gradAccum);
  if (!lower || *lower >= opts.upperBound) {
    setStatus(SolveStatus::Infeasible);
    return std::nullopt;
  }

  InterStageMilp p;
  Milp &milp = p.milp;
  const double G = opts.gradAccum;
  p.maxT = milp.addVar("Max_t", Milp::Kind::Continuous, 0, INFINITY, G - 1);
  p.maxD = opts.imbalanceAware ? milp.addVar("Max_d", Milp::Kind::Continuous, 0, INFINITY, 1) : -1;
  p.T.resize(S);
  for (int i = 0; i < S; ++i)
    p.T[i] = milp.addVar("T_" + std::to_string(i), Milp::Kind::Continuous, 0, INFINITY, 1);
  Row layerSum;
  for (int i = 0; i < S; ++i)
    if (!addStage(p, table, i, opts, layerSum)) {
      setStatus(SolveStatus::Infeasible);
      return std::nullopt;
    }
  milp.addRow("layers", layerSum, opts.totalLayers, opts.totalLayers);
  if (opts.totalGpus > 0)
    addGpuRows(p, table, opts.totalGpus);
  if (std::isfinite(opts.upperBound)) {
    Row obj{{p.maxT, G - 1}};
    if (p.maxD >= 0)
      obj.push_back({p.maxD, 1});
    for (int i = 0; i < S; ++i)
      obj.push_back({p.T[i], 1});
    milp.addRow("best_so_far", obj, -INFINITY, opts.upperBound);
  }
  if (!opts.dumpPath.empty())
    milp.writeLp(opts.dumpPath);
  SolveStatus st = milp.solve(opts.timeLimitSeconds);
  setStatus(st);
  if (st != SolveStatus::Optimal && st != SolveStatus::Feasible &&
      !(st == SolveStatus::TimeLimit && std::isfinite(milp.objective())))
    return std::nullopt;
  return readChoice(p, table, opts);
}

std::optional<InterStageChoice> mist::bruteForceInterStage(const StageTable &table,
                                                           const InterStageOptions &opts) {
  const int S = static_cast<int>(table.size());
  std::optional<InterStageChoice> best;
  std::vector<int> layers(S);
  std::vector<size_t> configs(S);
  std::vector<double> t(S), d(S);
  std::function<void(int, int, int, int)> rec = [&](int i, int used, int gpus, int prevGpus) {
    if (i == S) {
      if (used != opts.totalLayers || (opts.totalGpus > 0 && gpus != opts.totalGpus))
        return;
      double obj = interStageObjective(t, d, opts.gradAccum, opts.imbalanceAware);
      if (!best || obj < best->objective - 1e-12)
        best = InterStageChoice{layers, configs, obj};
      return;
    }
    for (auto &[l, cands] : table[i])
      for (const StageCandidate &c : cands) {
        if (opts.totalGpus > 0 && i > 0 && c.gpus > prevGpus)
          continue;
        layers[i] = l;
        configs[i] = c.config;
        t[i] = c.t;
        d[i] = c.d;
        rec(i + 1, used + l, gpus + c.gpus, c.gpus);
      }
  };
  rec(0, 0, 0, 0);
  return best;
}
